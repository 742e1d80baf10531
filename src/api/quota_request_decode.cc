#include "api/quota_request_decode.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <string>

#include "common/utf8.h"
#include "model/policy.h"
#include "model/yaml_utf8.h"

namespace berth::server {
namespace {

constexpr std::array<std::string_view, 7> kFields{
    "queue", "resource", "guaranteed", "borrow_limit", "weight", "lending_limit", "reason"};

}  // namespace

Result<store::QuotaRequest> ParseQuotaRequestBody(std::string_view body) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(body));
  } catch (const YAML::Exception& e) {
    return InvalidField("body", fmt::format("is not YAML or JSON: {}", EscapeInvalidUtf8(e.msg)));
  }
  BERTH_RETURN_IF_ERROR(model::CheckYamlUtf8(doc, body.size()));
  if (!doc.IsMap()) {
    return InvalidField("body",
                        "must be a map such as {queue: vision/training, resource: gpus, "
                        "guaranteed: 16, reason: ...}");
  }
  store::QuotaRequest r;
  try {
    for (auto it = doc.begin(); it != doc.end(); ++it) {
      std::string key = it->first.as<std::string>();
      if (std::find(kFields.begin(), kFields.end(), key) == kFields.end()) {
        return InvalidField(key, fmt::format("is not a field of a quota request; the fields are "
                                             "queue, resource, guaranteed, borrow_limit, weight, "
                                             "lending_limit, reason"));
      }
      if (!it->second.IsScalar() && !it->second.IsNull()) {
        return InvalidField(key, "must be a single value");
      }
    }
    auto text = [&](const char* key) {
      return doc[key] && doc[key].IsScalar() ? doc[key].Scalar() : std::string();
    };
    r.queue = text("queue");
    r.resource = text("resource");
    r.reason = text("reason");
    if (r.queue.empty()) {
      return InvalidField("queue", "is required: the queue's path, e.g. vision/training");
    }
    if (r.resource.empty()) {
      return InvalidField("resource", "is required: gpus, gpus/MODEL, gpu_memory, cpu or memory");
    }
    auto key = model::ParseResourceKey(r.resource);
    if (!key) {
      return InvalidField("resource",
                          fmt::format("'{}' is not a quota resource; write gpus, gpus/MODEL "
                                      "(gpus/H100-80GB), gpu_memory, cpu or memory",
                                      r.resource));
    }
    for (auto [name, slot] :
         {std::pair{"guaranteed", &r.guaranteed}, std::pair{"borrow_limit", &r.borrow_limit},
          std::pair{"lending_limit", &r.lending_limit}}) {
      std::string v = text(name);
      if (v.empty()) continue;
      auto amount = model::ParseQuotaAmount(key->kind, v, name);
      if (!amount) return std::unexpected(amount.error());
      *slot = *amount;
    }
    if (std::string w = text("weight"); !w.empty()) {
      std::int64_t weight = 0;
      auto [p, ec] = std::from_chars(w.data(), w.data() + w.size(), weight);
      if (ec != std::errc() || p != w.data() + w.size() || weight < 1 ||
          weight > model::kMaxWeight) {
        return InvalidField("weight", fmt::format("'{}' is not a weight; write an integer from 1 "
                                                  "to {}",
                                                  w, model::kMaxWeight));
      }
      r.weight = weight;
    }
  } catch (const YAML::Exception& e) {
    return InvalidField("body", fmt::format("cannot be read: {}", EscapeInvalidUtf8(e.msg)));
  }
  return r;
}

}  // namespace berth::server
