#include "common/units.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(ParseBytes, AcceptsBinaryAndDecimalUnits) {
  EXPECT_EQ(ParseBytes("80Gi").value(), 80ULL << 30);
  EXPECT_EQ(ParseBytes("512Mi").value(), 512ULL << 20);
  EXPECT_EQ(ParseBytes("16G").value(), 16'000'000'000ULL);
  EXPECT_EQ(ParseBytes("123").value(), 123ULL);
  EXPECT_EQ(ParseBytes("200GiB").value(), 200ULL << 30);
  EXPECT_EQ(ParseBytes("64KiB").value(), 64ULL << 10);
  EXPECT_EQ(ParseBytes("7B").value(), 7ULL);
}

TEST(ParseBytes, DecimalBytesAreAmbiguousAndTheErrorOffersBoth) {
  auto r = ParseBytes("80GB");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("80Gi"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("80G "), std::string::npos) << r.error().message;
}

TEST(ParseBytes, RejectsGarbageAndNamesTheFix) {
  auto r = ParseBytes("80GB");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("Gi"), std::string::npos);
  EXPECT_FALSE(ParseBytes("-1Gi").has_value());
  EXPECT_FALSE(ParseBytes("").has_value());
  EXPECT_FALSE(ParseBytes("99999999999Ti").has_value());
}

TEST(ParseDuration, AcceptsCompoundDurations) {
  EXPECT_EQ(ParseDurationMs("12h").value(), 12 * 3'600'000);
  EXPECT_EQ(ParseDurationMs("1h30m").value(), 90 * 60'000);
  EXPECT_EQ(ParseDurationMs("250ms").value(), 250);
  EXPECT_EQ(ParseDurationMs("2d").value(), 2 * 86'400'000);
  EXPECT_FALSE(ParseDurationMs("12").has_value());
  EXPECT_FALSE(ParseDurationMs("h").has_value());
  EXPECT_FALSE(ParseDurationMs("3w").has_value());
}

TEST(Format, RoundTrips) {
  EXPECT_EQ(FormatBytes(80ULL << 30), "80Gi");
  EXPECT_EQ(FormatBytes(1000), "1000");
  EXPECT_EQ(FormatDurationMs(90 * 60'000), "1h30m");
  EXPECT_EQ(FormatDurationMs(250), "250ms");
  EXPECT_EQ(FormatTimeMs(0), "1970-01-01T00:00:00.000Z");
}

}  // namespace
}  // namespace berth
