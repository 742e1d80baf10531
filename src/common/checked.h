// Integer arithmetic that cannot overflow: sums and products of quantities
// (milli-GPUs, bytes, millicores, milliseconds) taken over jobs, replicas,
// queues and nodes, whose counts no parse-time bound limits. Checked*
// returns nullopt where the exact result does not fit; Saturating* clamps
// it to the type's range, for sums that only feed comparisons against
// limits far below it (a clamped usage still reads as "over every quota").
#pragma once

#include <concepts>
#include <limits>
#include <optional>
#include <utility>

namespace berth {

template <std::integral T>
constexpr std::optional<T> CheckedAdd(T a, T b) {
  T out{};
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

template <std::integral T>
constexpr std::optional<T> CheckedSub(T a, T b) {
  T out{};
  if (__builtin_sub_overflow(a, b, &out)) return std::nullopt;
  return out;
}

template <std::integral T>
constexpr std::optional<T> CheckedMul(T a, T b) {
  T out{};
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

template <std::integral T>
constexpr T SaturatingAdd(T a, T b) {
  T out{};
  if (!__builtin_add_overflow(a, b, &out)) return out;
  return b > 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
}

template <std::integral T>
constexpr T SaturatingSub(T a, T b) {
  T out{};
  if (!__builtin_sub_overflow(a, b, &out)) return out;
  return b < 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
}

template <std::integral T>
constexpr T SaturatingMul(T a, T b) {
  T out{};
  if (!__builtin_mul_overflow(a, b, &out)) return out;
  return (a < 0) != (b < 0) ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
}

// `v` as a T, clamped to T's range (an unsigned byte count above INT64_MAX
// reads as INT64_MAX, never as a negative amount).
template <std::integral T, std::integral U>
constexpr T SaturatingCast(U v) {
  if (std::cmp_less(v, std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (std::cmp_greater(v, std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

}  // namespace berth
