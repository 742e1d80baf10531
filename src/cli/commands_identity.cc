// `berth login`, `whoami`, `identity`, `member` and `token`: who may use
// Berth and with which role (docs/security.md), and the CLI's config file.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/json_view.h"
#include "cli/table.h"
#include "common/units.h"

namespace berth::cli {
namespace {

using nlohmann::json;

std::string Time(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return "-";
  return FormatTimeMs(it->get<std::int64_t>());
}

std::string Roles(const json& tenants) {
  std::string out;
  if (!tenants.is_object()) return "-";
  for (const auto& [t, r] : tenants.items()) {
    out += (out.empty() ? "" : ", ") + t + ":" + (r.is_string() ? r.get<std::string>() : "?");
  }
  return out.empty() ? "-" : out;
}

void PrintIdentity(const Output& out, const json& id) {
  if (out.format == OutputFormat::kJson) return PrintJson(out, id);
  out.out << fmt::format("{} ({}{}){}\n  tenants: {}\n", Str(id, "name"), Str(id, "kind"),
                         Bool(id, "platform_admin")   ? ", platform-admin"
                         : Bool(id, "metrics_reader") ? ", metrics-reader"
                                                      : "",
                         Bool(id, "disabled") ? " [disabled]" : "", Roles(id["tenants"]));
}

}  // namespace

Result<CliConfig> LoadConfig(const std::filesystem::path& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return CliConfig{};
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto doc = json::parse(text.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Fail(Code::kInvalidArgument,
                fmt::format("{} is not a berth config file (JSON); remove it and run berth login",
                            path.string()));
  }
  CliConfig c;
  c.server = Str(doc, "server");
  c.token = Str(doc, "token");
  c.ca = Str(doc, "ca");
  return c;
}

Status SaveConfig(const std::filesystem::path& path, const CliConfig& config) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) {
    return Fail(Code::kInvalidArgument,
                fmt::format("cannot create {}: {}", path.parent_path().string(), ec.message()));
  }
  json doc = json::object();
  if (!config.server.empty()) doc["server"] = config.server;
  if (!config.token.empty()) doc["token"] = config.token;
  if (!config.ca.empty()) doc["ca"] = config.ca;
  const std::string text = doc.dump(2) + "\n";
  const std::filesystem::path tmp = path.string() + ".tmp";
  ::unlink(tmp.c_str());
  // 0600 from the first byte: the token is a password.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Fail(Code::kInvalidArgument,
                fmt::format("cannot write {}: {}", tmp.string(), std::strerror(errno)));
  }
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return Fail(Code::kInvalidArgument,
                fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
  }
  ::chmod(path.c_str(), 0600);
  return {};
}

Status Login(ApiClient& api, const std::filesystem::path& config_path, CliConfig config,
             const Output& out) {
  auto me = api.Post("/v1/login", "", "application/json");
  if (!me) return std::unexpected(me.error());
  BERTH_RETURN_IF_ERROR(SaveConfig(config_path, config));
  if (out.format == OutputFormat::kJson) return PrintJson(out, *me), Status{};
  out.out << fmt::format("logged in to {} as {}{}; tenants: {}\nsaved to {} (mode 0600)\n",
                         api.url().text, Str(*me, "name"),
                         Bool(*me, "platform_admin") ? " (platform-admin)" : "",
                         Roles((*me)["tenants"]), config_path.string());
  return {};
}

Status WhoAmI(ApiClient& api, const Output& out) {
  auto me = api.Get("/v1/whoami");
  if (!me) return std::unexpected(me.error());
  if (out.format == OutputFormat::kJson) return PrintJson(out, *me), Status{};
  PrintIdentity(out, *me);
  const json& token = (*me)["token"];
  if (token.is_object()) {
    out.out << fmt::format("  token: {} (expires {})\n", Str(token, "id"),
                           Time(token, "expires_ms") == "-" ? "never" : Time(token, "expires_ms"));
  }
  return {};
}

Status ListIdentities(ApiClient& api, std::uint64_t limit, const Output& out) {
  auto all = GetAllPages(api, "/v1/identities", {}, "identities", limit, PageOrder::kAppend);
  if (!all) return std::unexpected(all.error());
  const json r{{"identities", std::move(*all)}};
  if (out.format == OutputFormat::kJson) return PrintJson(out, r), Status{};
  Table t({"NAME", "KIND", "PLATFORM-ADMIN", "TENANTS", "STATE", "CREATED BY"});
  for (const auto& id : r["identities"]) {
    t.AddRow({Str(id, "name"), Str(id, "kind"), Bool(id, "platform_admin") ? "yes" : "no",
              Roles(id["tenants"]), Bool(id, "disabled") ? "disabled" : "active",
              Str(id, "created_by")});
  }
  out.out << t.Render();
  return {};
}

Status CreateIdentity(ApiClient& api, const std::string& name, bool service, bool platform_admin,
                      bool metrics_reader, const std::map<std::string, std::string>& tenants,
                      const Output& out) {
  json body{{"name", name}, {"kind", service ? "service" : "user"}};
  if (platform_admin) body["platform_admin"] = true;
  if (metrics_reader) body["metrics_reader"] = true;
  if (!tenants.empty()) body["tenants"] = tenants;
  auto r = api.Post("/v1/identities", body.dump(), "application/json");
  if (!r) return std::unexpected(r.error());
  if (out.format == OutputFormat::kJson) return PrintJson(out, *r), Status{};
  out.out << "created ";
  PrintIdentity(out, *r);
  out.out << fmt::format("give it a token: berth token create --identity {}\n", name);
  return {};
}

Status UpdateIdentity(ApiClient& api, const std::string& name, const std::string& action,
                      const Output& out) {
  auto r = api.Post(fmt::format("/v1/identities/{}/{}", name, action), "", "application/json");
  if (!r) return std::unexpected(r.error());
  if (out.format == OutputFormat::kJson) return PrintJson(out, *r), Status{};
  PrintIdentity(out, *r);
  return {};
}

Status ListMembers(ApiClient& api, const std::string& tenant, const Output& out) {
  auto r = api.Get(fmt::format("/v1/tenants/{}/members", tenant));
  if (!r) return std::unexpected(r.error());
  if (out.format == OutputFormat::kJson) return PrintJson(out, *r), Status{};
  Table t({"IDENTITY", "KIND", "ROLE", "STATE"});
  for (const auto& m : (*r)["members"]) {
    t.AddRow({Str(m, "identity"), Str(m, "kind"), Str(m, "role"),
              Bool(m, "disabled") ? "disabled" : "active"});
  }
  out.out << t.Render();
  return {};
}

Status SetMember(ApiClient& api, const std::string& tenant, const std::string& identity,
                 const std::string& role, const Output& out) {
  json body{{"identity", identity}, {"role", role}};
  auto r = api.Post(fmt::format("/v1/tenants/{}/members", tenant), body.dump(), "application/json");
  if (!r) return std::unexpected(r.error());
  if (out.format == OutputFormat::kJson) return PrintJson(out, *r), Status{};
  out.out << fmt::format("{} is now {} of tenant {}\n", identity, role, tenant);
  return {};
}

Status RemoveMember(ApiClient& api, const std::string& tenant, const std::string& identity,
                    const Output& out) {
  auto r = api.Post(fmt::format("/v1/tenants/{}/members/{}/remove", tenant, identity), "",
                    "application/json");
  if (!r) return std::unexpected(r.error());
  if (out.format == OutputFormat::kJson) return PrintJson(out, *r), Status{};
  out.out << fmt::format("{} is no longer a member of tenant {}\n", identity, tenant);
  return {};
}

Status CreateToken(ApiClient& api, const std::string& identity, const std::string& ttl,
                   const std::string& description, const Output& out) {
  json body = json::object();
  if (!identity.empty()) body["identity"] = identity;
  if (!ttl.empty()) body["ttl"] = ttl;
  if (!description.empty()) body["description"] = description;
  auto r = api.Post("/v1/tokens", body.dump(), "application/json");
  if (!r) return std::unexpected(r.error());
  if (out.format == OutputFormat::kJson) return PrintJson(out, *r), Status{};
  out.out << Str(*r, "token") << '\n';
  out.out << fmt::format(
      "token {} for {}, expires {}. It is shown only now: keep it, e.g. berth login "
      "--token-file FILE\n",
      Str(*r, "id"), Str(*r, "identity"), Time(*r, "expires_ms"));
  return {};
}

Status ListTokens(ApiClient& api, const std::string& identity, std::uint64_t limit,
                  const Output& out) {
  auto all =
      GetAllPages(api, "/v1/tokens", {{"identity", identity}}, "tokens", limit, PageOrder::kAppend);
  if (!all) return std::unexpected(all.error());
  const json r{{"tokens", std::move(*all)}};
  if (out.format == OutputFormat::kJson) return PrintJson(out, r), Status{};
  Table t({"ID", "IDENTITY", "CREATED", "EXPIRES", "REVOKED", "DESCRIPTION"});
  for (const auto& tok : r["tokens"]) {
    t.AddRow({Str(tok, "id"), Str(tok, "identity"), Time(tok, "created_ms"),
              tok["expires_ms"].is_null() ? "never" : Time(tok, "expires_ms"),
              tok["revoked_ms"].is_null()
                  ? "-"
                  : fmt::format("{} by {}", Time(tok, "revoked_ms"), Str(tok, "revoked_by")),
              Str(tok, "description")});
  }
  out.out << t.Render();
  return {};
}

Status RevokeToken(ApiClient& api, const std::string& id, const Output& out) {
  auto r = api.Post(fmt::format("/v1/tokens/{}/revoke", id), "", "application/json");
  if (!r) return std::unexpected(r.error());
  if (out.format == OutputFormat::kJson) return PrintJson(out, *r), Status{};
  out.out << fmt::format("token {} of {} revoked\n", id, Str(*r, "identity"));
  return {};
}

}  // namespace berth::cli
