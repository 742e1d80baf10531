// Policy texts the store tests share: the policy conformance suite and the
// SQLite store's own tests (reopening, migration) apply the same ones.
#pragma once

namespace berth::tests {

// Tenant vision with queue training (and nlp under it) next to default/default.
constexpr const char* kVisionPolicy = R"(# the vision team gets 8 GPUs
queues:
  - name: default
    children:
      - name: default
  - name: vision
    quota:
      gpus: {guaranteed: 8}
    children:
      - name: training
        quota:
          gpus: {guaranteed: 4, borrow_limit: 4}
        children:
          - name: nlp
)";

constexpr const char* kDefaultOnly = R"(queues:
  - name: default
    children:
      - name: default
)";

}  // namespace berth::tests
