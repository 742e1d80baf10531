// berth login, logout, whoami, and the admin commands identity, member and
// token.
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/api_error.h"
#include "cli/registry.h"

namespace berth::cli {
namespace {

struct IdentityFlags {
  std::string login_token_file;
  std::string login_token;
  std::string name;
  bool service = false;
  bool admin = false;
  bool metrics = false;
  std::vector<std::string> tenants;
  std::map<std::string, std::string> roles;
  std::string member_tenant;
  std::string member_identity;
  std::string member_role = "member";
  std::string token_identity;
  std::uint64_t list_limit = 0;  // identity list, token list: 0 for every row
  std::string token_ttl;
  std::string token_description;
  std::string token_id;
};

// The token to check: --token-file, else $BERTH_TOKEN, else stdin's first line.
int ReadLoginToken(CommandRegistry& r, IdentityFlags& f) {
  const Environment& env = r.env();
  std::string text;
  if (!f.login_token_file.empty()) {
    auto read = ReadDocument(f.login_token_file, env.in, "token file");
    if (!read) return r.Fail(kExitUsage, FormatError(read.error()));
    text = *read;
  } else if (env.token) {
    text = *env.token;
  } else {
    std::getline(env.in, text);
  }
  auto first = text.find_first_not_of(" \t\r\n");
  auto last = text.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return r.Fail(kExitUsage, "no token: pass --token-file FILE, set BERTH_TOKEN, or pipe it in");
  }
  f.login_token = text.substr(first, last - first + 1);
  if (env.config_path.empty()) {
    return r.Fail(kExitUsage, "nowhere to save the login: set BERTH_CONFIG or HOME");
  }
  return kExitOk;
}

void RegisterSession(CommandRegistry& r, IdentityFlags& f) {
  auto* login = r.app().add_subcommand(
      "login", "check an API token with berthd and save it (with --server) to the config file");
  login->add_option("--token-file", f.login_token_file,
                    "file holding the token (berthd's first start writes "
                    "<data-dir>/bootstrap-token); default: $BERTH_TOKEN, else stdin");
  r.OnCheck(login, [&r, &f] { return ReadLoginToken(r, f); });
  r.OnLogin(login, [&r, &f](ApiClient& api, const Output& out, const Connection& conn) {
    api.set_token(f.login_token);
    std::string saved_ca;
    if (!conn.ca.empty()) saved_ca = std::filesystem::absolute(conn.ca).string();
    CliConfig saved{conn.server, f.login_token, saved_ca};
    return Login(api, r.env().config_path, saved, out);
  });

  auto* logout = r.app().add_subcommand("logout", "forget the token saved by berth login");
  r.OnConfig(logout, [&r](CliConfig& config) {
    const Environment& env = r.env();
    bool had = !config.token.empty();
    config.token.clear();
    if (had) {
      if (auto st = SaveConfig(env.config_path, config); !st) {
        return r.Fail(kExitError, FormatError(st.error()));
      }
    }
    env.out << (had ? "logged out: the token is gone from " : "not logged in: no token in ")
            << env.config_path.string() << '\n';
    return kExitOk;
  });

  auto* whoami =
      r.app().add_subcommand("whoami", "who the token is: identity, roles, token expiry");
  r.OnRun(whoami, [](ApiClient& api, const Output& out) { return WhoAmI(api, out); });
}

void RegisterIdentity(CommandRegistry& r, IdentityFlags& f) {
  auto* identity = r.app().add_subcommand("identity", "people and service accounts (admins)");
  identity->require_subcommand(1);
  auto* list = identity->add_subcommand("list", "every identity you may manage");
  list->add_option("--limit", f.list_limit,
                   "the first N identities by name (default: every one, fetched page after page)")
      ->check(CLI::PositiveNumber);
  r.OnRun(list, [&f](ApiClient& api, const Output& out) {
    return ListIdentities(api, f.list_limit, out);
  });
  auto* create = identity->add_subcommand("create", "create a user or service account");
  create->add_option("NAME", f.name, "its name")->required();
  create->add_flag("--service", f.service, "a service account (CI, a bot)");
  create->add_flag("--platform-admin", f.admin, "make it a platform admin");
  create->add_flag("--metrics-reader", f.metrics,
                   "it may GET /metrics and nothing else (Prometheus; with --service, "
                   "no --tenant)");
  create->add_option("--tenant", f.tenants,
                     "TENANT=ROLE, role viewer, member or tenant-admin (repeatable)");
  r.OnCheck(create, [&r, &f] {
    for (const auto& t : f.tenants) {
      auto eq = t.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == t.size()) {
        return r.Fail(kExitUsage,
                      fmt::format("--tenant '{}': write TENANT=ROLE, e.g. vision=member", t));
      }
      f.roles[t.substr(0, eq)] = t.substr(eq + 1);
    }
    return kExitOk;
  });
  r.OnRun(create, [&f](ApiClient& api, const Output& out) {
    return CreateIdentity(api, f.name, f.service, f.admin, f.metrics, f.roles, out);
  });
  for (const char* action :
       {"disable", "enable", "grant-platform-admin", "revoke-platform-admin"}) {
    auto* cmd = identity->add_subcommand(action, fmt::format("{} an identity", action));
    cmd->add_option("NAME", f.name, "the identity")->required();
    r.OnRun(cmd, [&f, action = std::string(action)](ApiClient& api, const Output& out) {
      return UpdateIdentity(api, f.name, action, out);
    });
  }
}

void RegisterMember(CommandRegistry& r, IdentityFlags& f) {
  auto* member = r.app().add_subcommand("member", "who belongs to a tenant, with which role");
  member->require_subcommand(1);
  auto* add = member->add_subcommand("add", "give an identity a role in a tenant");
  add->add_option("TENANT", f.member_tenant, "the tenant")->required();
  add->add_option("IDENTITY", f.member_identity, "the identity")->required();
  add->add_option("--role", f.member_role, "viewer, member or tenant-admin")->capture_default_str();
  r.OnRun(add, [&f](ApiClient& api, const Output& out) {
    return SetMember(api, f.member_tenant, f.member_identity, f.member_role, out);
  });
  auto* remove = member->add_subcommand("remove", "take an identity out of a tenant");
  remove->add_option("TENANT", f.member_tenant, "the tenant")->required();
  remove->add_option("IDENTITY", f.member_identity, "the identity")->required();
  r.OnRun(remove, [&f](ApiClient& api, const Output& out) {
    return RemoveMember(api, f.member_tenant, f.member_identity, out);
  });
  auto* list = member->add_subcommand("list", "a tenant's members and their roles");
  list->add_option("TENANT", f.member_tenant, "the tenant")->required();
  r.OnRun(list, [&f](ApiClient& api, const Output& out) {
    return ListMembers(api, f.member_tenant, out);
  });
}

void RegisterToken(CommandRegistry& r, IdentityFlags& f) {
  auto* token = r.app().add_subcommand("token", "API tokens: create (shown once), list, revoke");
  token->require_subcommand(1);
  auto* create = token->add_subcommand("create", "a new token (yours, or --identity's)");
  create->add_option("--identity", f.token_identity, "for this identity (yourself by default)");
  create->add_option("--ttl", f.token_ttl, "lifetime, 1s to 400d (default 90d)");
  create->add_option("--description", f.token_description, "what it is for");
  r.OnRun(create, [&f](ApiClient& api, const Output& out) {
    return CreateToken(api, f.token_identity, f.token_ttl, f.token_description, out);
  });
  auto* list = token->add_subcommand("list", "tokens (never their secrets)");
  list->add_option("--identity", f.token_identity, "another identity's tokens");
  list->add_option("--limit", f.list_limit,
                   "the newest N tokens (default: every one, fetched page after page)")
      ->check(CLI::PositiveNumber);
  r.OnRun(list, [&f](ApiClient& api, const Output& out) {
    return ListTokens(api, f.token_identity, f.list_limit, out);
  });
  auto* revoke = token->add_subcommand("revoke", "revoke a token at once");
  revoke->add_option("ID", f.token_id, "the token id (berth token list)")->required();
  r.OnRun(revoke,
          [&f](ApiClient& api, const Output& out) { return RevokeToken(api, f.token_id, out); });
}

}  // namespace

void RegisterIdentityCommands(CommandRegistry& registry) {
  auto& flags = registry.Keep<IdentityFlags>();
  RegisterSession(registry, flags);
  RegisterIdentity(registry, flags);
  RegisterMember(registry, flags);
  RegisterToken(registry, flags);
}

}  // namespace berth::cli
