// The web console's files as berthd serves them at /ui/: a file, the page
// for the console's own routes, 404s that say how to build the console, and
// no way out of the directory (.., %2e%2e, absolute paths, symbolic links);
// over a real server too, where HEAD sends the length and no body.
#include "http/static_files.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>

#include "http/server.h"

namespace berth::http {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, std::string_view text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

class StaticFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("berth-static-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    root_ = base_ / "ui";
    Write(root_ / "index.html", "<!doctype html><title>Berth</title>");
    Write(root_ / "assets/app-1a2b.js", "console.log('berth')");
    Write(root_ / "assets/app-1a2b.css", "body{}");
    Write(base_ / "secret.txt", "the data dir's token");
    fs::create_symlink(base_ / "secret.txt", root_ / "assets/leak.txt");
    fs::create_directory_symlink(base_, root_ / "up");
  }
  void TearDown() override { fs::remove_all(base_); }

  Response Get(const StaticSite& site, std::string path) const {
    Request req;
    req.method = "GET";
    req.path = std::move(path);
    Response res;
    site.Serve(req, res);
    return res;
  }

  fs::path base_;
  fs::path root_;
};

TEST(ContentType, FollowsTheExtensionWhateverItsCase) {
  EXPECT_EQ(ContentTypeFor("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("app-1a2b.JS"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("a.css"), "text/css; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("logo.svg"), "image/svg+xml");
  EXPECT_EQ(ContentTypeFor("f.woff2"), "font/woff2");
  EXPECT_EQ(ContentTypeFor("no-extension"), "application/octet-stream");
  EXPECT_EQ(ContentTypeFor("x.exe"), "application/octet-stream");
}

TEST_F(StaticFilesTest, ResolveKeepsEveryNameInsideTheRoot) {
  auto ok = ResolveUnder(root_, "assets/app-1a2b.js");
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  EXPECT_EQ(*ok, fs::canonical(root_ / "assets/app-1a2b.js"));
  // An absolute path is a name under the root, not the file system's.
  auto absolute = ResolveUnder(root_, "/etc/passwd");
  ASSERT_TRUE(absolute.has_value());
  EXPECT_EQ(absolute->parent_path(), fs::canonical(root_) / "etc");
  for (const char* bad : {"..", "../secret.txt", "assets/../../secret.txt", "./index.html",
                          "assets/..", "a\\..\\secret.txt"}) {
    EXPECT_FALSE(ResolveUnder(root_, bad).has_value()) << bad;
  }
  EXPECT_FALSE(ResolveUnder(root_, std::string("index.html\0.js", 14)).has_value());
  // Links that lead out of the root, to a file or through a directory.
  EXPECT_FALSE(ResolveUnder(root_, "assets/leak.txt").has_value());
  EXPECT_FALSE(ResolveUnder(root_, "up/secret.txt").has_value());
}

TEST_F(StaticFilesTest, ServesFilesWithTheirTypeAndTheConsoleHeaders) {
  StaticSite site("/ui/", root_);
  ASSERT_TRUE(site.available());
  auto js = Get(site, "/ui/assets/app-1a2b.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.body, "console.log('berth')");
  EXPECT_EQ(js.get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(js.get_header_value("Cache-Control"), "public, max-age=31536000, immutable");
  auto csp = js.get_header_value("Content-Security-Policy");
  EXPECT_TRUE(csp.starts_with("default-src 'self'")) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos);
  EXPECT_NE(csp.find("script-src 'self';"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos);
  EXPECT_EQ(js.get_header_value("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(js.get_header_value("Referrer-Policy"), "no-referrer");
  auto css = Get(site, "/ui/assets/app-1a2b.css");
  EXPECT_EQ(css.get_header_value("Content-Type"), "text/css; charset=utf-8");
  auto index = Get(site, "/ui/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<!doctype html><title>Berth</title>");
  EXPECT_EQ(index.get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(index.get_header_value("Cache-Control"), "no-cache");
}

TEST_F(StaticFilesTest, TheConsolesOwnRoutesGetThePageAndMissingAssetsA404) {
  StaticSite site("/ui/", root_);
  for (const char* route :
       {"/ui/jobs", "/ui/jobs/12", "/ui/assets", "/ui/sign-in/", "/ui/fleet/h1.example.com"}) {
    auto r = Get(site, route);
    EXPECT_EQ(r.status, 200) << route;
    EXPECT_EQ(r.body, "<!doctype html><title>Berth</title>") << route;
  }
  for (const char* asset : {"/ui/assets/gone-9f9f.js", "/ui/gone.css", "/ui/assets/gone"}) {
    auto missing = Get(site, asset);
    EXPECT_EQ(missing.status, 404) << asset;
    EXPECT_EQ(missing.body.find("<!doctype"), std::string::npos) << asset;
  }
  for (const char* bad : {"/ui/../secret.txt", "/ui/assets/leak.txt", "/ui/up/secret.txt",
                          "/ui/assets/../../secret.txt"}) {
    auto r = Get(site, bad);
    EXPECT_EQ(r.status, 404) << bad;
    EXPECT_EQ(r.body.find("token"), std::string::npos) << bad;
    EXPECT_EQ(r.get_header_value("X-Content-Type-Options"), "nosniff") << bad;
  }
}

TEST_F(StaticFilesTest, WithoutABuiltConsoleEveryPathSaysHowToBuildIt) {
  StaticSite site("/ui/", base_ / "not-built");
  EXPECT_FALSE(site.available());
  for (const char* path : {"/ui/", "/ui/jobs", "/ui/assets/app.js"}) {
    auto r = Get(site, path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_NE(r.body.find("npm ci && npm run build"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("--ui-dir"), std::string::npos) << r.body;
  }
}

// Over a real server: the path arrives percent-encoded and is decoded before
// the site sees it, so %2e%2e is a ".." segment and refused as one.
TEST_F(StaticFilesTest, OverTheServerHeadSendsNoBodyAndEncodedTraversalIsRefused) {
  StaticSite site("/ui/", root_);
  Server server(ServerOptions{});
  auto serve = [&site](const Request& req, Response& res) { site.Serve(req, res); };
  server.Get("/ui/.*", serve);
  server.Head("/ui/.*", serve);
  server.Get("/v1/.*", [](const Request&, Response& res) {
    res.status = 404;
    res.set_content(R"({"error":"no such route"})", "application/json");
  });
  auto port = server.Bind("127.0.0.1", 0);
  ASSERT_TRUE(port.has_value()) << port.error().message;
  server.Start();
  httplib::Client c("127.0.0.1", *port);
  c.set_keep_alive(true);
  auto head = c.Head("/ui/assets/app-1a2b.js");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->body, "");
  EXPECT_EQ(head->get_header_value("Content-Length"), "20");
  // The connection goes on after a HEAD: its answer had no body to misread.
  auto get = c.Get("/ui/assets/app-1a2b.js");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->body, "console.log('berth')");
  for (const char* bad : {"/ui/%2e%2e/secret.txt", "/ui/%2E%2E/secret.txt",
                          "/ui/assets/%2e%2e%2f%2e%2e%2fsecret.txt", "/ui/..%2fsecret.txt"}) {
    auto r = c.Get(bad);
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 404) << bad;
    EXPECT_EQ(r->body.find("token"), std::string::npos) << bad;
  }
  // The API's paths are never the console's page.
  auto api = c.Get("/v1/nothing");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->body.find("<!doctype"), std::string::npos);
  // A write to the console's files has no route.
  auto post = c.Post("/ui/index.html", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 404);
  server.Stop();
}

}  // namespace
}  // namespace berth::http
