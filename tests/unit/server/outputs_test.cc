// The broker that pairs berthd's OutputRequests with the agents' replies:
// a reply reaches the caller that asked, one from another node or for no
// pending request is dropped, and a node that does not answer is
// Unavailable in bounded time.
#include "control/outputs.h"

#include <gtest/gtest.h>

#include <thread>

namespace berth::server {
namespace {

// An agent that answers every request on a thread of its own, as `answerer`.
class AnsweringSession final : public AgentSession {
 public:
  AnsweringSession(std::string node, OutputBroker& broker, std::string answerer, bool open = true)
      : node_(std::move(node)), broker_(broker), answerer_(std::move(answerer)), open_(open) {}
  ~AnsweringSession() override {
    for (auto& t : threads_) t.join();
  }
  bool Send(const berth::v1::ServerMessage& msg) override {
    if (!open_) return false;
    const auto req = msg.output_request();
    threads_.emplace_back([this, req] {
      berth::v1::OutputReply reply;
      reply.set_request_id(req.request_id());
      reply.set_data("bytes of " + req.path());
      broker_.OnReply(answerer_, reply);
    });
    return true;
  }
  const std::string& node() const override { return node_; }

 private:
  std::string node_;
  OutputBroker& broker_;
  std::string answerer_;
  bool open_;
  std::vector<std::thread> threads_;
};

TEST(OutputBroker, AReplyReachesTheCallerThatAskedAndNoOther) {
  OutputBroker broker;
  AnsweringSession session("n1", broker, "n1");
  berth::v1::OutputRequest req;
  req.set_path("model.pt");
  auto reply = broker.Ask(session, req);
  ASSERT_TRUE(reply.has_value()) << reply.error().message;
  EXPECT_EQ(reply->data(), "bytes of model.pt");
  req.set_path("other");
  auto second = broker.Ask(session, req);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->data(), "bytes of other");
}

TEST(OutputBroker, AReplyFromAnotherNodeIsDroppedAndTheAskTimesOut) {
  OutputBroker broker;
  AnsweringSession impostor("n1", broker, "n2");
  auto reply = broker.Ask(impostor, berth::v1::OutputRequest{}, std::chrono::milliseconds(200));
  ASSERT_FALSE(reply.has_value());
  EXPECT_EQ(reply.error().code, Code::kUnavailable);
  EXPECT_NE(reply.error().message.find("node n1 did not answer"), std::string::npos)
      << reply.error().message;
  // A late or unknown reply changes nothing.
  berth::v1::OutputReply stray;
  stray.set_request_id(12345);
  broker.OnReply("n1", stray);
}

TEST(OutputBroker, AClosedStreamIsUnavailableAtOnce) {
  OutputBroker broker;
  AnsweringSession closed("n1", broker, "n1", false);
  auto reply = broker.Ask(closed, berth::v1::OutputRequest{});
  ASSERT_FALSE(reply.has_value());
  EXPECT_EQ(reply.error().code, Code::kUnavailable);
  EXPECT_NE(reply.error().message.find("disconnected"), std::string::npos);
}

}  // namespace
}  // namespace berth::server
