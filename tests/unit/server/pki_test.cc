// The local CA: certificates it issues verify against it (checked with
// OpenSSL's own chain verification), those of another CA do not, a node
// certificate carries the node name as its CN, and keys are written 0600.
#include "control/pki.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/node_cert.h"
#include "model/node.h"

namespace berth::server::pki {
namespace {

namespace fs = std::filesystem;

// 2026-11-30T00:00:00Z.
constexpr std::int64_t kNow = 1796083200000;
constexpr std::int64_t kDayMs = 86400000;

X509* Parse(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

unsigned Mode(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

std::string Slurp(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class PkiFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "berth-pki-XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(Pki, ServerCertVerifiesAgainstItsCaAndNamesLoopback) {
  auto ca = CreateCa("test CA", kNow);
  ASSERT_TRUE(ca) << ca.error().message;
  auto server = IssueServerCert(*ca, {"berth.example.com", "10.1.2.3"}, kNow);
  ASSERT_TRUE(server) << server.error().message;
  EXPECT_TRUE(VerifyCert(ca->cert_pem, server->cert_pem, kNow));

  X509* cert = Parse(server->cert_pem);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_host(cert, "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(cert, "berth.example.com", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(cert, "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(cert, "::1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(cert, "10.1.2.3", 0), 1);
  EXPECT_NE(X509_check_host(cert, "other.example.com", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_purpose(cert, X509_PURPOSE_SSL_SERVER, 0), 1);
  X509_free(cert);
}

TEST(Pki, NodeCertCarriesTheNodeNameAsCnAndIsAClientCert) {
  auto ca = CreateCa("test CA", kNow);
  ASSERT_TRUE(ca);
  auto node = IssueNodeCert(*ca, "gpu-07", kNow);
  ASSERT_TRUE(node) << node.error().message;
  auto cn = CommonName(node->cert_pem);
  ASSERT_TRUE(cn) << cn.error().message;
  EXPECT_EQ(*cn, "gpu-07");
  EXPECT_TRUE(VerifyCert(ca->cert_pem, node->cert_pem, kNow));
  X509* cert = Parse(node->cert_pem);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_purpose(cert, X509_PURPOSE_SSL_CLIENT, 0), 1);
  EXPECT_NE(X509_check_purpose(cert, X509_PURPOSE_SSL_SERVER, 0), 1);
  X509_free(cert);
}

TEST(Pki, ACertificateOfAnotherCaIsRefused) {
  auto ca = CreateCa("ours", kNow);
  auto other = CreateCa("theirs", kNow);
  ASSERT_TRUE(ca && other);
  auto node = IssueNodeCert(*other, "gpu-07", kNow);
  ASSERT_TRUE(node);
  auto st = VerifyCert(ca->cert_pem, node->cert_pem, kNow);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("does not verify"), std::string::npos) << st.error().message;
}

TEST(Pki, ValidityFollowsTheGivenClock) {
  auto ca = CreateCa("ours", kNow);
  ASSERT_TRUE(ca);
  auto server = IssueServerCert(*ca, {}, kNow);
  ASSERT_TRUE(server);
  EXPECT_TRUE(VerifyCert(ca->cert_pem, server->cert_pem, kNow + 365 * kDayMs));
  EXPECT_FALSE(VerifyCert(ca->cert_pem, server->cert_pem, kNow - 2 * kDayMs));     // not yet valid
  EXPECT_FALSE(VerifyCert(ca->cert_pem, server->cert_pem, kNow + 1900 * kDayMs));  // expired
}

TEST(Pki, NodeCertificatesLiveForTheirTtlFromTheirIssueTime) {
  auto ca = CreateCa("ours", kNow);
  ASSERT_TRUE(ca);
  // The default: seven days.
  auto week = IssueNodeCert(*ca, "n1", kNow);
  ASSERT_TRUE(week);
  EXPECT_TRUE(VerifyCert(ca->cert_pem, week->cert_pem, kNow + 6 * kDayMs));
  EXPECT_FALSE(VerifyCert(ca->cert_pem, week->cert_pem, kNow + 8 * kDayMs));
  // A short one, not backdated: its notBefore is the issue time.
  auto short_lived = IssueNodeCert(*ca, "n1", kNow, 20'000);
  ASSERT_TRUE(short_lived);
  auto validity = ValidityOf(short_lived->cert_pem);
  ASSERT_TRUE(validity) << validity.error().message;
  EXPECT_EQ(validity->not_before_ms, kNow);
  EXPECT_EQ(validity->not_after_ms, kNow + 20'000);
  EXPECT_TRUE(VerifyCert(ca->cert_pem, short_lived->cert_pem, kNow + 19'000));
  EXPECT_FALSE(VerifyCert(ca->cert_pem, short_lived->cert_pem, kNow + 21'000));
  EXPECT_FALSE(VerifyCert(ca->cert_pem, short_lived->cert_pem, kNow - 1'000));
  // Outside 10s..366d: refused, naming the flag.
  for (std::int64_t ttl : {std::int64_t{9'000}, 367 * kDayMs}) {
    auto bad = IssueNodeCert(*ca, "n1", kNow, ttl);
    ASSERT_FALSE(bad) << ttl;
    EXPECT_EQ(bad.error().field, "--node-cert-ttl");
  }
}

TEST(Pki, ARenewalIsSignedForTheStreamsOwnNodeOnly) {
  auto ca = CreateCa("ours", kNow);
  ASSERT_TRUE(ca);
  auto own = agent::MakeNodeCsr("gpu-07");
  ASSERT_TRUE(own) << own.error().message;
  auto cert = SignNodeCsr(*ca, own->csr_pem, "gpu-07", kNow, kDayMs);
  ASSERT_TRUE(cert) << cert.error().message;
  EXPECT_EQ(*CommonName(*cert), "gpu-07");
  EXPECT_TRUE(VerifyCert(ca->cert_pem, *cert, kNow + kDayMs / 2));
  EXPECT_FALSE(VerifyCert(ca->cert_pem, *cert, kNow + 2 * kDayMs));
  // It certifies the key the node made (and kept), and the agent reads it
  // back as berthd wrote it: due for renewal at 2/3 of its life.
  EXPECT_TRUE(agent::CheckCertMatchesKey(*cert, own->key_pem));
  EXPECT_FALSE(agent::CheckCertMatchesKey(*cert, agent::MakeNodeCsr("gpu-07")->key_pem));
  auto read = agent::ReadNodeCert(*cert);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->common_name, "gpu-07");
  EXPECT_EQ(read->not_before_ms, kNow);
  EXPECT_EQ(read->not_after_ms, kNow + kDayMs);
  EXPECT_EQ(agent::RenewAtMs(*read), kNow + kDayMs * 2 / 3);
  X509* x = Parse(*cert);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(X509_check_purpose(x, X509_PURPOSE_SSL_CLIENT, 0), 1);
  X509_free(x);

  // A stream authenticated as gpu-07 asking for gpu-08: refused.
  auto other = agent::MakeNodeCsr("gpu-08");
  ASSERT_TRUE(other);
  auto stolen = SignNodeCsr(*ca, other->csr_pem, "gpu-07", kNow, kDayMs);
  ASSERT_FALSE(stolen);
  EXPECT_EQ(stolen.error().code, Code::kPermissionDenied);
  EXPECT_NE(stolen.error().message.find("cannot get a certificate for 'gpu-08'"), std::string::npos)
      << stolen.error().message;
  // Not a CSR at all.
  auto junk =
      SignNodeCsr(*ca, "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n", "gpu-07", kNow, kDayMs);
  ASSERT_FALSE(junk);
  EXPECT_EQ(junk.error().code, Code::kInvalidArgument);
}

TEST(Pki, RemovalRevokesCertificatesIssuedUpToItAndNoLater) {
  auto ca = CreateCa("ours", kNow);
  ASSERT_TRUE(ca);
  auto before = IssueNodeCert(*ca, "n1", kNow);
  ASSERT_TRUE(before);
  auto issued = ValidityOf(before->cert_pem);
  ASSERT_TRUE(issued);
  const std::int64_t removed_at = kNow + 500;
  EXPECT_TRUE(model::NodeCertRevoked(issued->not_before_ms, removed_at));
  // Issued in the removal's own second: revoked too (second precision).
  auto same_second = IssueNodeCert(*ca, "n1", kNow + 900);
  ASSERT_TRUE(same_second);
  EXPECT_TRUE(model::NodeCertRevoked(ValidityOf(same_second->cert_pem)->not_before_ms, removed_at));
  // Issued a second later (the node added back): valid.
  auto after = IssueNodeCert(*ca, "n1", kNow + 1'000);
  ASSERT_TRUE(after);
  EXPECT_FALSE(model::NodeCertRevoked(ValidityOf(after->cert_pem)->not_before_ms, removed_at));
  // An older removal does not touch a newer certificate.
  EXPECT_FALSE(model::NodeCertRevoked(issued->not_before_ms, kNow - 1));
}

TEST(Pki, BadNamesAreRefusedNamingTheField) {
  auto ca = CreateCa("ours", kNow);
  ASSERT_TRUE(ca);
  auto node = IssueNodeCert(*ca, "a,b", kNow);
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().field, "NODE");
  auto server = IssueServerCert(*ca, {"bad name"}, kNow);
  ASSERT_FALSE(server);
  EXPECT_EQ(server.error().field, "--tls-san");
}

TEST_F(PkiFiles, DataDirCaIsCreatedOnceAndKeysAre0600) {
  auto server = EnsureServerCert(dir_, {}, kNow);
  ASSERT_TRUE(server) << server.error().message;
  TlsFiles files = FilesIn(dir_);
  EXPECT_EQ(Mode(files.dir), 0700U);
  EXPECT_EQ(Mode(files.ca_key), 0600U);
  EXPECT_EQ(Mode(files.server_key), 0600U);
  EXPECT_EQ(Mode(files.ca_cert), 0644U);
  std::string ca_pem = Slurp(files.ca_cert);
  EXPECT_TRUE(VerifyCert(ca_pem, server->cert_pem, kNow));

  // A second start keeps both: node certificates already issued stay valid.
  auto again = EnsureServerCert(dir_, {}, kNow);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->cert_pem, server->cert_pem);
  EXPECT_EQ(Slurp(files.ca_cert), ca_pem);

  // A new name asked for: the server certificate is reissued by the same CA.
  auto renamed = EnsureServerCert(dir_, {"berth.example.com"}, kNow);
  ASSERT_TRUE(renamed);
  EXPECT_NE(renamed->cert_pem, server->cert_pem);
  EXPECT_EQ(Slurp(files.ca_cert), ca_pem);
  EXPECT_TRUE(VerifyCert(ca_pem, renamed->cert_pem, kNow));
}

TEST_F(PkiFiles, NodeCredentialsAreWrittenForTheDataDirsCa) {
  ASSERT_FALSE(WriteNodeCredentials(dir_, "n1", dir_ / "out", kNow))
      << "no CA yet: must fail rather than create one";
  ASSERT_TRUE(EnsureCa(dir_, kNow));
  auto st = WriteNodeCredentials(dir_, "n1", dir_ / "out", kNow);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(Mode(dir_ / "out" / "n1-key.pem"), 0600U);
  auto creds = LoadCredentials(dir_ / "out" / "n1.pem", dir_ / "out" / "n1-key.pem");
  ASSERT_TRUE(creds) << creds.error().message;
  EXPECT_EQ(*CommonName(creds->cert_pem), "n1");
  EXPECT_TRUE(VerifyCert(Slurp(dir_ / "out" / "ca.pem"), creds->cert_pem, kNow));
}

TEST_F(PkiFiles, AKeyThatDoesNotMatchItsCertificateIsRefused) {
  auto ca = CreateCa("ours", kNow);
  auto a = IssueNodeCert(*ca, "a", kNow);
  auto b = IssueNodeCert(*ca, "b", kNow);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(WriteFileAtomic(dir_ / "a.pem", a->cert_pem, 0644));
  ASSERT_TRUE(WriteFileAtomic(dir_ / "b-key.pem", b->key_pem, 0600));
  auto creds = LoadCredentials(dir_ / "a.pem", dir_ / "b-key.pem");
  ASSERT_FALSE(creds);
  EXPECT_EQ(creds.error().field, "--tls-key");
}

}  // namespace
}  // namespace berth::server::pki
