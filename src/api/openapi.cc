#include "api/openapi.h"

namespace berth::server {

std::string_view OpenApiDocument() {
  static constexpr std::string_view kDoc = R"json({
  "openapi": "3.0.3",
  "info": {
    "title": "Berth API",
    "version": "0.1.0",
    "description": "Berth's control-plane API: submit and manage GPU jobs, read the inventory, version the scheduling policy. Errors are {\"error\": {\"code\", \"message\", \"field\"}} where field names the offending input."
  },
  "paths": {
    "/healthz": {"get": {"summary": "Liveness, and this berthd's role (single, leader or standby)", "responses": {"200": {"description": "berthd is serving"}}}},
    "/readyz": {"get": {"summary": "Readiness: 200 on the berthd that serves the API (single or leader), 503 on a standby", "responses": {"200": {"description": "this berthd serves the API"}, "503": {"description": "a standby: send requests to the leader"}}}},
    "/v1/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3 document"}}}},
    "/v1/jobs": {
      "post": {
        "summary": "Submit a job",
        "description": "The body is a job spec in YAML or JSON (docs/jobs.md). The job is acknowledged (201) only once it is durable; submissions that arrive together share one commit. A spec with array: stores every element as a job of its own, all or none, and answers with the first (its array field gives the array's id, size and jobs.first..jobs.last; Location is /v1/jobs?array=ID).",
        "requestBody": {"required": true, "content": {"application/yaml": {"schema": {"$ref": "#/components/schemas/JobSpecInput"}}, "application/json": {"schema": {"$ref": "#/components/schemas/JobSpecInput"}}}},
        "responses": {
          "201": {"description": "Accepted and stored", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "400": {"description": "Invalid spec; nothing stored", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
          "409": {"description": "The queue says over_quota: reject and the job, with the queue's pending and running jobs, is over its guarantee; the message has the numbers; nothing stored", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
          "413": {"description": "Body over berthd --max-body (2 MiB by default)"}
        }
      },
      "get": {
        "summary": "List jobs, newest first, a page at a time",
        "description": "Each job is a summary (id, name, tenant, queue, submitted_by, state, reason, priority, replicas, resources {gpus, gpu_model, gpu_share_millis, gpu_share_bytes}, times, exit, failures, array) unless full=true asks for the spec and placement as GET /v1/jobs/{id} gives them (without runs and timeline). A page holds at most limit jobs; next, present when more follow, is the opaque cursor to pass as after for the next page (keyset: jobs added meanwhile never shift or repeat a page). Every page shows only the caller's tenants' jobs.",
        "parameters": [
          {"name": "state", "in": "query", "schema": {"type": "string"}, "description": "Comma-separated states: Pending, Scheduled, Running, Succeeded, Failed, Cancelled"},
          {"name": "tenant", "in": "query", "schema": {"type": "string"}},
          {"name": "queue", "in": "query", "schema": {"type": "string"}},
          {"name": "array", "in": "query", "schema": {"type": "integer"}, "description": "Only the elements of this job array (its id: its first element's job id)"},
          {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 5000, "default": 500}, "description": "Jobs per page; above 5000 is refused with 400 naming limit"},
          {"name": "after", "in": "query", "schema": {"type": "string"}, "description": "The next of the page before (opaque); absent: the first page"},
          {"name": "full", "in": "query", "schema": {"type": "boolean", "default": false}, "description": "Each job's spec and placement too"}
        ],
        "responses": {"200": {"description": "Jobs", "content": {"application/json": {"schema": {"type": "object", "properties": {"jobs": {"type": "array", "items": {"type": "object"}}, "next": {"type": "string"}}}}}}, "400": {"description": "A bad state, array, limit, after or full; error.field names it"}}
      }
    },
    "/v1/jobs/{id}": {
      "get": {
        "summary": "A job with its placement and timeline",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
        "responses": {"200": {"description": "The job", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}}, "404": {"description": "No such job"}}
      }
    },
    "/v1/jobs/{id}/cancel": {
      "post": {
        "summary": "Cancel a job",
        "description": "A pending job is cancelled at once; a running one gets SIGTERM to its process group, then SIGKILL after the grace period, and becomes Cancelled when every replica has exited.",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
        "responses": {"200": {"description": "The job after the request", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}}, "404": {"description": "No such job"}, "409": {"description": "Already finished, or a replica of a service (field job; scale or delete the service)"}}
      }
    },
    "/v1/arrays/{id}/cancel": {
      "post": {
        "summary": "Cancel every element of a job array",
        "description": "An array's id is its first element's job id. Each element that has not finished is cancelled as POST /v1/jobs/{id}/cancel cancels a job, all in one transaction. The array's tenant only: another tenant's member gets 404.",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
        "responses": {"200": {"description": "What was done", "content": {"application/json": {"schema": {"type": "object", "properties": {"array": {"type": "integer"}, "cancelled": {"type": "integer", "description": "Elements cancelled before they started"}, "stopping": {"type": "integer", "description": "Elements whose runs were asked to stop"}}}}}}, "404": {"description": "No such array"}}
      }
    },
    "/v1/events": {
      "get": {
        "summary": "Committed changes as server-sent events (text/event-stream)",
        "description": "Events: hello (id and the feed's epoch and seq), job ({id, tenant, queue, state}: only jobs of the caller's tenants), node ({node, change}: registered, state, health, cordon, removed), alert ({id, state}: platform admins only), reset (the changes since Last-Event-ID are no longer kept, or it is another berthd's: refetch), end ({reason}: the token was revoked or expired, the session ended). A keep-alive comment every 15 s. A reconnection with Last-Event-ID replays what it missed. The caller is checked again every --events-recheck.",
        "parameters": [
          {"name": "topics", "in": "query", "schema": {"type": "string"}, "description": "Comma-separated: job, node, alert (default: all the caller may see; alert only for platform admins)"},
          {"name": "after", "in": "query", "schema": {"type": "string"}, "description": "An event id to replay from, as Last-Event-ID (the header wins)"},
          {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}}
        ],
        "responses": {
          "200": {"description": "The stream", "content": {"text/event-stream": {"schema": {"type": "string"}}}},
          "400": {"description": "An unknown topic (field: topics)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
          "403": {"description": "The alert topic asked for by a caller who is no platform admin, or a job token"}
        }
      }
    },
    "/v1/jobs/{id}/logs": {
      "get": {
        "summary": "A job's combined stdout and stderr",
        "parameters": [
          {"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}},
          {"name": "replica", "in": "query", "schema": {"type": "integer"}},
          {"name": "follow", "in": "query", "schema": {"type": "boolean"}, "description": "Keep streaming until the job finishes"}
        ],
        "responses": {"200": {"description": "Log text", "content": {"text/plain": {"schema": {"type": "string"}}}}}
      }
    },
    "/v1/jobs/{id}/outputs": {
      "get": {
        "summary": "A job's outputs: what its run left in BERTH_OUTPUT_DIR on its node",
        "description": "Lists a directory, or describes a file, below the output directory of one run: replica 0 unless replica says, the given attempt, else the latest attempt that started. Asked of the run's node at once; nothing is copied to berthd. Only files the run's identity owns are read, and no symbolic link is followed. The job's tenant only: another tenant's member gets 404.",
        "parameters": [
          {"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}},
          {"name": "replica", "in": "query", "schema": {"type": "integer", "default": 0}},
          {"name": "attempt", "in": "query", "schema": {"type": "integer"}},
          {"name": "path", "in": "query", "schema": {"type": "string", "default": ""}, "description": "Relative to the output directory, without . or .. components"}
        ],
        "responses": {
          "200": {"description": "The listing or the file", "content": {"application/json": {"schema": {"type": "object", "properties": {"job": {"type": "integer"}, "replica": {"type": "integer"}, "attempt": {"type": "integer"}, "run": {"type": "string"}, "node": {"type": "string"}, "path": {"type": "string"}, "type": {"type": "string", "enum": ["dir", "file"]}, "size": {"type": "integer"}, "modified_ms": {"type": "integer"}, "truncated": {"type": "boolean"}, "entries": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "type": {"type": "string", "enum": ["file", "dir", "other"]}, "size": {"type": "integer"}, "modified_ms": {"type": "integer"}}}}}}}}},
          "400": {"description": "A bad path (absolute, with .., through a link, a special file; field: path)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
          "403": {"description": "A file the run's identity does not own"},
          "404": {"description": "No such job, run or path"},
          "503": {"description": "The run's node is not connected or did not answer"}
        }
      }
    },
    "/v1/jobs/{id}/outputs/content": {
      "get": {
        "summary": "Download one file of a job's outputs",
        "description": "The file's bytes as application/octet-stream, streamed from the run's node slice by slice; a body shorter than its Content-Length means the download failed (the file shrank or the node went away). Headers X-Berth-Run, X-Berth-Node and X-Berth-Modified-Ms name the source. Every download is audited (job.outputs.download).",
        "parameters": [
          {"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}},
          {"name": "replica", "in": "query", "schema": {"type": "integer", "default": 0}},
          {"name": "attempt", "in": "query", "schema": {"type": "integer"}},
          {"name": "path", "in": "query", "required": true, "schema": {"type": "string"}}
        ],
        "responses": {
          "200": {"description": "The file", "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
          "400": {"description": "A bad path, or a directory (field: path)"},
          "403": {"description": "A file the run's identity does not own"},
          "404": {"description": "No such job, run or file"},
          "503": {"description": "The run's node is not connected or did not answer"}
        }
      }
    },
    "/v1/jobs/{id}/why": {
      "get": {
        "summary": "Why a job is where it is: its reason in words and numbers",
        "description": "The job's structured reason with its message rendered in the asked language, and the timeline events that explain it (the last Preempting, Reclaiming, Requeued, Exited, Cancelled and Failed events, at most 8, oldest first). Timeline messages are as recorded (English). A pending job's reason.layers ranks what holds it back, the layer holding it now first (order, quota, budget, nodes, not_looked_at_yet); when that is not the nodes, a node layer follows: of the nodes, how many could ever take a replica and what rules out the others (NoNodeFits' static causes, least change first), also appended to reason.message.",
        "parameters": [
          {"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}},
          {"name": "lang", "in": "query", "schema": {"type": "string", "enum": ["en", "zh"], "default": "en"}, "description": "Language of reason.message: en (English) or zh (Simplified Chinese); a locale such as zh_CN counts by its language part"}
        ],
        "responses": {
          "200": {"description": "The explanation", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Why"}}}},
          "400": {"description": "Bad id, or a language other than en or zh (field: lang)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
          "404": {"description": "No such job"}
        }
      }
    },
    "/v1/jobs/{id}/telemetry": {
      "get": {
        "summary": "A job's GPU telemetry: per-run utilization summaries and its GPUs' bucket series",
        "description": "Summaries count a bucket when its start is in [from, to); series hold the buckets overlapping [from, to). Series show only the job's own buckets and runs; shared is true when other runs held the card too. from defaults to the job's submission.",
        "parameters": [
          {"name": "from", "in": "query", "schema": {"type": "string"}, "description": "Unix ms, or a duration back from now such as 6h"},
          {"name": "to", "in": "query", "schema": {"type": "string"}, "description": "Unix ms, or a duration back from now (default: now plus a minute, so the open minute is included)"},
          {"name": "step", "in": "query", "schema": {"type": "string"}, "description": "Merge buckets to this many whole minutes (5m, 1h); 0 or absent: as stored"},
          {"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}
        ],
        "responses": {"200": {"description": "Telemetry", "content": {"application/json": {"schema": {"type": "object", "properties": {"job": {"type": "integer"}, "from_ms": {"type": "integer"}, "to_ms": {"type": "integer"}, "step_ms": {"type": "integer"}, "runs": {"type": "array", "items": {"type": "object", "properties": {"run_id": {"type": "string"}, "utilization": {"$ref": "#/components/schemas/Utilization"}}}}, "gpus": {"type": "array", "items": {"type": "object", "properties": {"uuid": {"type": "string"}, "node": {"type": "string"}, "gpu": {"type": "integer"}, "buckets": {"type": "array", "items": {"$ref": "#/components/schemas/TelemetryBucket"}}}}}}}}}}, "400": {"description": "Bad from, to or step (the field is named)"}, "404": {"description": "No such job"}, "503": {"description": "berthd keeps no telemetry"}}
      }
    },
    "/v1/nodes": {"get": {"summary": "Nodes with lease state and GPU counts", "responses": {"200": {"description": "Nodes", "content": {"application/json": {"schema": {"type": "object", "properties": {"nodes": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}}}}},
    "/v1/jobs/{id}/checkpoint": {
      "post": {
        "summary": "A running job reports a checkpoint it saved",
        "description": "Counts for the work an eviction would lose. Without at_ms the checkpoint is now. A member or tenant-admin of the job's tenant may call it, and so may the job itself with its own job token (BERTH_JOB_TOKEN, given to every run; docs/security.md): a job token is refused for every other job (404) and every route other than this one, GET /v1/jobs/{id} and GET /v1/jobs/{id}/why of its own job (403).",
        "parameters": [
          {"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}},
          {"name": "at_ms", "in": "query", "schema": {"type": "integer"}, "description": "When it was saved, unix ms, not in the future"}
        ],
        "responses": {"200": {"description": "Recorded: {job, checkpoint_at_ms, runs}"}, "400": {"description": "Bad at_ms (field: at_ms)"}, "404": {"description": "No such job"}, "409": {"description": "The job is not running"}}
      }
    },
    "/v1/nodes/{node}": {
      "get": {
        "summary": "One node with its GPUs and its last 100 events",
        "parameters": [{"name": "node", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "The node: as in /v1/nodes, plus gpus and events [{time_ms, event, message}]"}, "404": {"description": "No such node"}}
      },
      "delete": {
        "summary": "Remove a node and revoke its certificates",
        "description": "Platform admins only. Refused (409, naming the runs) while the node has Starting or Running runs: drain it, or cordon it and wait, or cancel the jobs. Otherwise the node leaves the inventory, every certificate of that node name issued at or before now is revoked (its agent is disconnected at once, and refused when it reconnects or asks to renew), and the audit record (node.remove) commits with the removal. A certificate issued later with `berthd cert node` adds the node back.",
        "parameters": [{"name": "node", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "Removed: {node, removed, certificates_revoked}"}, "404": {"description": "No such node"}, "409": {"description": "The node still has active runs (named)"}}
      }
    },
    "/v1/nodes/{node}/{action}": {
      "post": {
        "summary": "Cordon, drain or uncordon a node",
        "description": "cordon: nothing new is placed there. drain: cordon and stop its jobs, which are queued again. uncordon: lift either.",
        "parameters": [
          {"name": "node", "in": "path", "required": true, "schema": {"type": "string"}},
          {"name": "action", "in": "path", "required": true, "schema": {"type": "string", "enum": ["cordon", "drain", "uncordon"]}},
          {"name": "reason", "in": "query", "schema": {"type": "string", "maxLength": 1024}}
        ],
        "responses": {"200": {"description": "Done: {node, gpu, action, reason} or {node, gpu, uncordoned}"}, "404": {"description": "No such node"}}
      }
    },
    "/v1/nodes/{node}/gpus/{index}/{action}": {
      "post": {
        "summary": "Cordon or uncordon one GPU",
        "description": "Uncordoning a GPU also resolves its open alerts.",
        "parameters": [
          {"name": "node", "in": "path", "required": true, "schema": {"type": "string"}},
          {"name": "index", "in": "path", "required": true, "schema": {"type": "integer"}},
          {"name": "action", "in": "path", "required": true, "schema": {"type": "string", "enum": ["cordon", "uncordon"]}},
          {"name": "reason", "in": "query", "schema": {"type": "string", "maxLength": 1024}}
        ],
        "responses": {"200": {"description": "Done"}, "400": {"description": "Not a GPU index (field: gpu)"}, "404": {"description": "No such node or GPU"}}
      }
    },
    "/v1/alerts": {
      "get": {
        "summary": "Open alerts (GPU hardware, node NotReady, queue wait, budget, idle allocation), oldest first",
        "description": "A page holds the newest limit matches, oldest first; next, present when older alerts match, is the cursor of the page before (pass it as after).",
        "parameters": [{"name": "all", "in": "query", "schema": {"type": "boolean"}, "description": "Resolved ones too"},
                       {"name": "kind", "in": "query", "schema": {"type": "string", "maxLength": 32}, "description": "Only this kind (gpu_hardware, node_not_ready, queue_wait, budget, idle_allocation, service_slo)"},
                       {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 5000, "default": 500}, "description": "Alerts per page; above 5000 is refused with 400 naming limit"},
                       {"name": "after", "in": "query", "schema": {"type": "string"}, "description": "The next of the page before (opaque): the page of older alerts"}],
        "responses": {"200": {"description": "{alerts: [{id, kind, severity, node, gpu, message, raised_ms, resolved_ms, resolved_by, rule, subject}], next}"}, "400": {"description": "A bad limit or after; error.field names it"}}
      }
    },
    "/v1/alerts/{id}/resolve": {
      "post": {
        "summary": "Resolve an open alert by hand; its sinks get a resolved event; audited as alert.resolve",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
        "responses": {"200": {"description": "The alert, resolved"}, "404": {"description": "No such alert"}, "409": {"description": "Resolved already"}}
      }
    },
    "/v1/alert-rules": {
      "get": {"summary": "The alert rules in force (the defaults when none were applied)", "responses": {"200": {"description": "{version, default, yaml, sinks, rules}"}}},
      "post": {
        "summary": "Apply an alert rules document (YAML body) as a new version; audited as alert_rules.apply",
        "parameters": [{"name": "comment", "in": "query", "schema": {"type": "string", "maxLength": 1024}},
                       {"name": "base_version", "in": "query", "schema": {"type": "integer", "minimum": 1}, "description": "The version the document was written against: refused with 409 (field base_version) if another version was applied since"}],
        "responses": {"201": {"description": "{version, sinks, rules}"}, "400": {"description": "Invalid rules; field names the offending one"}, "409": {"description": "base_version is no longer the newest version; nothing changed"}}
      }
    },
    "/v1/alert-deliveries": {
      "get": {
        "summary": "Recent webhook deliveries, newest first: pending, delivered and failed",
        "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 5000, "default": 500}, "description": "Deliveries per page; above 5000 is refused with 400 naming limit"},
                       {"name": "after", "in": "query", "schema": {"type": "string"}, "description": "The next of the page before (opaque): the page of older deliveries"}],
        "responses": {"200": {"description": "{deliveries: [{id, alert_id, sink, event, state, attempts, next_attempt_ms, last_error, delivered_ms, created_ms}], next}"}, "400": {"description": "A bad limit or after; error.field names it"}}
      }
    },
    "/v1/gpus": {"get": {"summary": "Every GPU with its health and the job holding it", "responses": {"200": {"description": "GPUs", "content": {"application/json": {"schema": {"type": "object", "properties": {"gpus": {"type": "array", "items": {"$ref": "#/components/schemas/Gpu"}}}}}}}}}},
    "/v1/gpus/{uuid}/telemetry": {
      "get": {
        "summary": "One GPU's telemetry buckets",
        "description": "Buckets overlapping [from, to) (default: the last hour), minute buckets where kept, hour buckets before. Run ids of tenants the caller cannot read are replaced by \"another tenant\".",
        "parameters": [
          {"name": "from", "in": "query", "schema": {"type": "string"}, "description": "Unix ms, or a duration back from now such as 6h"},
          {"name": "to", "in": "query", "schema": {"type": "string"}, "description": "Unix ms, or a duration back from now (default: now plus a minute, so the open minute is included)"},
          {"name": "step", "in": "query", "schema": {"type": "string"}, "description": "Merge buckets to this many whole minutes (5m, 1h); 0 or absent: as stored"},
          {"name": "uuid", "in": "path", "required": true, "schema": {"type": "string"}}
        ],
        "responses": {"200": {"description": "Buckets", "content": {"application/json": {"schema": {"type": "object", "properties": {"uuid": {"type": "string"}, "node": {"type": "string"}, "gpu": {"type": "integer"}, "model": {"type": "string"}, "buckets": {"type": "array", "items": {"$ref": "#/components/schemas/TelemetryBucket"}}}}}}}, "400": {"description": "Bad from, to or step"}, "404": {"description": "No such GPU"}, "503": {"description": "berthd keeps no telemetry"}}
      }
    },
    "/v1/policy": {
      "get": {
        "summary": "The active scheduling policy",
        "responses": {"200": {"description": "The active version with its YAML and parsed queues", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PolicyVersion"}}}}}
      },
      "post": {
        "summary": "Apply a new policy version",
        "description": "The body is a policy document in YAML (docs/scheduling.md). It becomes a new, active version; history is append-only. Refused (400, field queues) when it removes a queue that still holds pending or running jobs. The X-Berth-User header names who applied it.",
        "parameters": [
          {"name": "comment", "in": "query", "schema": {"type": "string"}, "description": "Why; shown in the version list"},
          {"name": "dry_run", "in": "query", "schema": {"type": "boolean"}, "description": "Check everything and answer 200 with the diff from the active version; apply nothing"},
          {"name": "base_version", "in": "query", "schema": {"type": "integer", "minimum": 1}, "description": "The version the document was written against: refused with 409 (field base_version) if another version was applied since"}
        ],
        "requestBody": {"required": true, "content": {"application/yaml": {"schema": {"type": "string"}}}},
        "responses": {
          "200": {"description": "dry_run: what applying would change (PolicyDiff with dry_run true)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PolicyDiff"}}}},
          "201": {"description": "Applied", "content": {"application/json": {"schema": {"type": "object", "properties": {"version": {"type": "integer"}}}}}},
          "400": {"description": "Invalid policy, or it would strand jobs; nothing changed", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
          "409": {"description": "base_version is no longer the active version; nothing changed", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
        }
      }
    },
    "/v1/policy/versions": {
      "get": {
        "summary": "Every policy version, oldest first",
        "responses": {"200": {"description": "Versions without their text", "content": {"application/json": {"schema": {"type": "object", "properties": {"active": {"type": "integer"}, "versions": {"type": "array", "items": {"$ref": "#/components/schemas/PolicyVersion"}}}}}}}}
      }
    },
    "/v1/policy/versions/{version}": {
      "get": {
        "summary": "One policy version with its YAML and parsed queues",
        "parameters": [{"name": "version", "in": "path", "required": true, "schema": {"type": "integer", "minimum": 1}}],
        "responses": {"200": {"description": "The version", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PolicyVersion"}}}}, "404": {"description": "No such version"}}
      }
    },
    "/v1/policy/rollback": {
      "post": {
        "summary": "Roll back: apply an older version's text again, as a new version",
        "parameters": [
          {"name": "to", "in": "query", "required": true, "schema": {"type": "integer", "minimum": 1}},
          {"name": "comment", "in": "query", "schema": {"type": "string"}, "description": "Default: rollback to vN"}
        ],
        "responses": {
          "201": {"description": "Applied", "content": {"application/json": {"schema": {"type": "object", "properties": {"version": {"type": "integer"}, "restores": {"type": "integer"}}}}}},
          "400": {"description": "The old version would strand jobs (field to); nothing changed"},
          "404": {"description": "No such version"}
        }
      }
    },
    "/v1/policy/diff": {
      "get": {
        "summary": "What changed between two versions",
        "parameters": [
          {"name": "from", "in": "query", "schema": {"type": "integer", "minimum": 1}, "description": "Default: the version before to (0, the empty document, before version 1)"},
          {"name": "to", "in": "query", "schema": {"type": "integer", "minimum": 1}, "description": "Default: the active version"}
        ],
        "responses": {"200": {"description": "A unified diff of the normalised YAML and a structured summary", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PolicyDiff"}}}}, "404": {"description": "No such version"}}
      }
    },
    "/v1/policy/preview": {
      "post": {
        "summary": "What a policy would have done to the recent history (applies nothing)",
        "description": "Replays the jobs submitted in the window on the current nodes through the scheduling core on a virtual clock, once under the active policy and once under the proposed one, and compares per tenant: jobs, mean and p95 queueing delay, mean completion time, GPU-hours and, when prices are given, cost. The policy is validated exactly as POST /v1/policy validates it; nothing is applied or stored. A window where no job ran answers with jobs 0 and a message instead of figures.",
        "parameters": [
          {"name": "window", "in": "query", "schema": {"type": "string", "default": "7d"}, "description": "How far back to replay: a duration such as 7d, 12h"},
          {"name": "prices", "in": "query", "schema": {"type": "string"}, "description": "Price per GPU-hour by GPU model, comma-separated MODEL:PRICE; the model default prices every other model, e.g. H100-80GB:3.5,default:2. Without it cost is null (unpriced)"}
        ],
        "requestBody": {"required": true, "content": {"application/yaml": {"schema": {"type": "string"}}}},
        "responses": {
          "200": {"description": "Current against proposed, overall and per tenant", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PolicyPreview"}}}},
          "400": {"description": "Invalid policy (field names the offending path), window or prices; nothing changes", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
          "409": {"description": "The policy would strand jobs, or no nodes are registered"}
        }
      }
    },
    "/v1/history": {
      "get": {
        "summary": "The job history of a window, for replay in berth-sim",
        "description": "Jobs submitted in [since, until) with their resources, priority and every run of every attempt, the node inventory and the active policy. Format berth-history/1 (docs/api.md#history).",
        "parameters": [
          {"name": "since", "in": "query", "schema": {"type": "string", "default": "7d"}, "description": "Milliseconds since the epoch, or a duration back from now (7d, 12h)"},
          {"name": "until", "in": "query", "schema": {"type": "string"}, "description": "Milliseconds since the epoch, or a duration back from now; default now"}
        ],
        "responses": {
          "200": {"description": "The history document", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/History"}}}},
          "400": {"description": "Bad since or until"}
        }
      }
    },
    "/metrics": {
      "get": {
        "summary": "Prometheus metrics",
        "description": "The Prometheus text exposition format 0.0.4: GPUs by pool, model and state, one berth_gpu_info per GPU with its occupant, nodes, jobs, pending jobs by reason, queue wait and scheduler cycle histograms, job outcomes, preemptions and admin interventions, each inference service's replicas and, with the gateway, its requests in flight and held, request duration histogram, responses by status class and last cold start (docs/metrics.md). Scrape with the token of a metrics-reader identity (berth identity create prometheus --service --metrics-reader), which may read this and nothing else; a platform-admin's token works too.",
        "responses": {
          "200": {"description": "The metrics", "content": {"text/plain": {"schema": {"type": "string"}}}},
          "503": {"description": "This berthd keeps no metrics"}
        }
      }
    },
    "/v1/quota-requests": {
      "post": {
        "summary": "File a quota request: a queue's quota for one resource, to be decided by a platform admin",
        "description": "Body (YAML or JSON): queue (path), resource (gpus, gpus/MODEL, gpu_memory, cpu, memory), any of guaranteed, borrow_limit, lending_limit (amounts as the policy writes them) and weight, and reason. Audited as quota.request.",
        "requestBody": {"required": true, "content": {"application/yaml": {"schema": {"$ref": "#/components/schemas/QuotaRequestInput"}}, "application/json": {"schema": {"$ref": "#/components/schemas/QuotaRequestInput"}}}},
        "responses": {
          "201": {"description": "Filed, Pending", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QuotaRequest"}}}},
          "400": {"description": "Unknown queue or resource, bad amount, nothing asked, no reason (field names which)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
        }
      },
      "get": {
        "summary": "Quota requests, newest first",
        "parameters": [
          {"name": "state", "in": "query", "schema": {"type": "string", "enum": ["Pending", "Approved", "Rejected", "Withdrawn"]}},
          {"name": "tenant", "in": "query", "schema": {"type": "string"}},
          {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 500, "minimum": 1, "maximum": 5000}, "description": "Requests per page; above 5000 is refused with 400 naming limit"},
          {"name": "after", "in": "query", "schema": {"type": "string"}, "description": "The next of the page before (opaque): the page of older requests"}
        ],
        "responses": {"200": {"description": "Requests; next, present when older requests match, is the cursor of the next page", "content": {"application/json": {"schema": {"type": "object", "properties": {"requests": {"type": "array", "items": {"$ref": "#/components/schemas/QuotaRequest"}}, "next": {"type": "string"}}}}}}, "400": {"description": "A bad state, limit or after; error.field names it"}}
      }
    },
    "/v1/quota-requests/{id}": {
      "get": {
        "summary": "One quota request",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
        "responses": {"200": {"description": "The request", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QuotaRequest"}}}}, "404": {"description": "No such request"}}
      }
    },
    "/v1/quota-requests/{id}/approve": {
      "post": {
        "summary": "Approve: the active policy with the requested quota becomes a new policy version, in one transaction",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}, {"name": "comment", "in": "query", "schema": {"type": "string"}}],
        "responses": {"200": {"description": "Approved; policy_version names the new version", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QuotaRequest"}}}}, "400": {"description": "The new policy would be invalid (the validator's message); nothing changed"}, "404": {"description": "No such request"}, "409": {"description": "Not Pending (the message names its state)"}}
      }
    },
    "/v1/quota-requests/{id}/reject": {
      "post": {
        "summary": "Reject, saying why",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}, {"name": "comment", "in": "query", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "Rejected", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QuotaRequest"}}}}, "400": {"description": "No comment"}, "404": {"description": "No such request"}, "409": {"description": "Not Pending"}}
      }
    },
    "/v1/quota-requests/{id}/withdraw": {
      "post": {
        "summary": "Withdraw a pending request",
        "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
        "responses": {"200": {"description": "Withdrawn", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QuotaRequest"}}}}, "404": {"description": "No such request"}, "409": {"description": "Not Pending"}}
      }
    },
    "/v1/services": {
      "post": {
        "summary": "Apply an inference service: create it, or make a changed spec its new revision",
        "description": "The body is a service spec in YAML or JSON (docs/services.md); an invalid one is 400 with error.field naming the field. The caller needs the role member or tenant-admin in the spec's tenant (else 403, field tenant). The queue must be one of the tenant's queues of kind inference in the active policy (kind interactive for a spec of kind session; else 400, field queue, naming the ones it may use). A spec whose kind differs from the stored one of the same name is 409, field kind. A create past berthd --max-services-per-tenant is 429 naming the limit and the flag. The same spec again changes nothing (200, applied unchanged). berthd runs the service's replicas as jobs it owns (docs/services.md, Replicas); status says how many it wants and has. Audited as service.apply, committed with the change.",
        "requestBody": {"required": true, "content": {"application/yaml": {"schema": {"type": "object"}}, "application/json": {"schema": {"type": "object"}}}},
        "responses": {
          "201": {"description": "Created (revision 1)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Service"}}}},
          "200": {"description": "A new revision, or unchanged (applied says which)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Service"}}}},
          "400": {"description": "Invalid spec, or a queue that is not an inference queue of the tenant; nothing stored", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
          "403": {"description": "Not a member or tenant-admin of the spec's tenant"},
          "429": {"description": "The tenant has --max-services-per-tenant services already"}
        }
      },
      "get": {
        "summary": "Services, newest first, a page at a time",
        "description": "Every page holds only the services of the caller's tenants (all for a platform admin), without revisions.",
        "parameters": [
          {"name": "tenant", "in": "query", "schema": {"type": "string"}},
          {"name": "kind", "in": "query", "schema": {"type": "string", "enum": ["service", "session"]}, "description": "Only inference services or only interactive sessions; absent: both"},
          {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 500, "minimum": 1, "maximum": 5000}, "description": "Services per page; above 5000 is refused with 400 naming limit"},
          {"name": "after", "in": "query", "schema": {"type": "string"}, "description": "The next of the page before (opaque)"}
        ],
        "responses": {"200": {"description": "Services; next, present when more follow, is the cursor of the next page", "content": {"application/json": {"schema": {"type": "object", "properties": {"services": {"type": "array", "items": {"$ref": "#/components/schemas/Service"}}, "next": {"type": "string"}, "gateway": {"type": "object", "nullable": true, "description": "The gateway services are called through, the same for every caller with a token; null when berthd runs none (--gateway-listen off)", "properties": {"url": {"type": "string", "description": "Its frontend, as --gateway-listen gives it (http://HOST:PORT); a service is at URL/s/TENANT/NAME/"}, "up": {"type": "boolean", "description": "Whether the service controller's last sync of it succeeded"}}}}}}}}, "400": {"description": "A bad kind, limit or after; error.field names it"}}
      }
    },
    "/v1/services/{tenant}/{name}": {
      "get": {
        "summary": "One service: its spec, status and kept revisions (newest first, at most 10)",
        "parameters": [{"name": "tenant", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "The service", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Service"}}}}, "404": {"description": "No such service, or one of a tenant the caller is not a member of"}}
      },
      "delete": {
        "summary": "Delete a service and its revisions",
        "description": "Needs member or tenant-admin of its tenant. Audited as service.delete.",
        "parameters": [{"name": "tenant", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "Deleted"}, "403": {"description": "A viewer"}, "404": {"description": "No such service (or another tenant's)"}}
      }
    },
    "/v1/services/{tenant}/{name}/access": {
      "get": {
        "summary": "Whether the caller may call the service through the gateway",
        "description": "What the gateway asks for a service with access: tenant (the default) before it lets a request through: a member or tenant-admin of the service's tenant, or a platform admin, may. Not audited (a read); rate-limited as every route.",
        "parameters": [{"name": "tenant", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "The caller may; X-Berth-User names it", "headers": {"X-Berth-User": {"schema": {"type": "string"}}}, "content": {"application/json": {"schema": {"type": "object", "properties": {"tenant": {"type": "string"}, "service": {"type": "string"}, "user": {"type": "string"}}}}}}, "401": {"description": "No token, or not a valid one"}, "403": {"description": "A viewer"}, "404": {"description": "No such service (or another tenant's)"}}
      }
    },
    "/v1/services/{tenant}/{name}/scale": {
      "post": {
        "summary": "Set the replica bounds: a new revision with replicas {min, max}",
        "description": "Either bound may be left out (it keeps its value). 0 <= min <= max, 1 <= max <= 1024. The same bounds change nothing. Audited as service.scale.",
        "parameters": [{"name": "tenant", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "min", "in": "query", "schema": {"type": "integer", "minimum": 0}}, {"name": "max", "in": "query", "schema": {"type": "integer", "minimum": 1}}],
        "responses": {"200": {"description": "The service after", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Service"}}}}, "400": {"description": "Bad bounds (field min or max)"}, "403": {"description": "A viewer"}, "404": {"description": "No such service (or another tenant's)"}, "409": {"description": "A session (kind session): it runs one replica"}}
      }
    },
    "/v1/services/{tenant}/{name}/rollback": {
      "post": {
        "summary": "Roll back: a new revision whose spec is the revision before the current one",
        "description": "The restored spec's queue is checked against the active policy as an apply's is. Audited as service.rollback.",
        "parameters": [{"name": "tenant", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "The service after; revisions[0].restores names the revision restored", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Service"}}}}, "400": {"description": "The restored spec's queue is no longer an inference queue (field queue)"}, "403": {"description": "A viewer"}, "404": {"description": "No such service (or another tenant's)"}, "409": {"description": "No earlier revision (field revision)"}}
      }
    },
    "/v1/services/{tenant}/{name}/rollout/resume": {
      "post": {
        "summary": "Resume a canary rollout: its current step ends now and the next begins",
        "description": "Ends the current canary step (rollout.canary) whatever its pause: the next step, or after the last the rolling update of the rest. Audited as service.rollout.resume.",
        "parameters": [{"name": "tenant", "in": "path", "required": true, "schema": {"type": "string"}}, {"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
        "responses": {"200": {"description": "The service (its status from the controller's round before the resume) and resumed: {step_ended, steps}", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Service"}}}}, "403": {"description": "A viewer"}, "404": {"description": "No such service (or another tenant's)"}, "409": {"description": "No canary steps (field rollout.canary), no step under way or another resume moved it first (field rollout)"}}
      }
    },
    "/v1/audit": {
      "get": {
        "summary": "The audit trail: API changes, refusals and Berth's own actions, oldest first",
        "description": "Each record: seq, time_ms, actor, tenant, action (job.submit, job.cancel, job.checkpoint, policy.apply, policy.rollback, quota.request, quota.approve, quota.reject, quota.withdraw, service.apply, service.scale, service.rollback, service.delete, node.cordon, node.drain, node.uncordon, node.remove, node.cert.renew, gpu.cordon, gpu.uncordon), object (job/12, policy/v3, node/a, gpu/a/3), before and after (small JSON summaries or null), request_id, source, outcome (ok, denied: CODE, failed: MESSAGE), prev_hash and hash (docs/operations.md#audit-log).",
        "parameters": [
          {"name": "since", "in": "query", "schema": {"type": "string"}, "description": "Milliseconds since the epoch, or a duration back from now (1h, 7d)"},
          {"name": "until", "in": "query", "schema": {"type": "string"}, "description": "As since; exclusive; default none"},
          {"name": "actor", "in": "query", "schema": {"type": "string"}},
          {"name": "tenant", "in": "query", "schema": {"type": "string"}},
          {"name": "action", "in": "query", "schema": {"type": "string"}, "description": "An action, or a family ending in a dot (job.)"},
          {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 500, "minimum": 1, "maximum": 5000}, "description": "The newest N matches (one page)"},
          {"name": "after", "in": "query", "schema": {"type": "string"}, "description": "The next of the page before (opaque): the page of older records"}
        ],
        "responses": {
          "200": {"description": "{\"records\": [...], \"next\": cursor of the older page, absent on the last}", "content": {"application/json": {"schema": {"type": "object", "properties": {"records": {"type": "array", "items": {"type": "object"}}, "next": {"type": "string"}}}}}},
          "400": {"description": "Bad since, until, limit or after"}
        }
      }
    },
    "/v1/audit/verify": {
      "get": {
        "summary": "Recompute the audit hash chain and check it against the remembered head",
        "description": "Answers 200 either way: ok, records, head {seq, hash}, first_bad_seq (null when ok, or when the problem is not one record), problem, remembered {meta, file} and notes.",
        "responses": {
          "200": {"description": "The verdict", "content": {"application/json": {"schema": {"type": "object", "properties": {"ok": {"type": "boolean"}, "records": {"type": "integer"}, "first_bad_seq": {"type": "integer", "nullable": true}, "problem": {"type": "string"}}}}}}
        }
      }
    },
    "/v1/whoami": {"get": {"summary": "The caller: identity, kind, platform_admin, tenants (tenant -> role) and its token (id, expiry)", "responses": {"200": {"description": "The caller"}, "401": {"description": "No valid token"}}}},
    "/v1/login": {"post": {"summary": "Check the token and record a login in the audit trail (berth login)", "responses": {"200": {"description": "As /v1/whoami"}, "401": {"description": "No valid token"}}}},
    "/v1/console/session": {"post": {"summary": "Sign in to the web console with the bearer token: sets the HttpOnly, Secure, SameSite=Strict session cookie berth_session (12 h at most, never past the token's expiry, ended by the token's revocation) and answers the caller with console.csrf, the token every change made with the cookie repeats in the X-Berth-CSRF header; audited as console.sign_in", "responses": {"201": {"description": "Signed in"}, "401": {"description": "No valid token"}, "409": {"description": "Already signed in with a console session"}}}, "get": {"summary": "The caller and its console session (console: null for a bearer token)", "responses": {"200": {"description": "The caller"}, "401": {"description": "No valid token or session"}}}, "delete": {"summary": "Sign out of the console: ends the session and clears the cookie; audited as console.sign_out", "responses": {"200": {"description": "signed_out: whether a session ended"}, "401": {"description": "No valid token or session"}, "403": {"description": "A console session without its X-Berth-CSRF header"}}}},
    "/v1/identities": {
      "get": {"summary": "Identities: all for a platform-admin; for a tenant-admin, the members of its tenants with their roles there", "description": "By name, a page at a time: next, present when more follow, is the cursor to pass as after. Every page holds only identities the caller may list, whatever the cursor.",
              "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 5000, "default": 500}, "description": "Identities per page; above 5000 is refused with 400 naming limit"},
                             {"name": "after", "in": "query", "schema": {"type": "string"}, "description": "The next of the page before (opaque); absent: the first page"}],
              "responses": {"200": {"description": "{\"identities\": [...], \"next\"}"}, "400": {"description": "A bad limit or after; error.field names it"}, "403": {"description": "Administers no tenant"}}},
      "post": {"summary": "Create a user or service account", "description": "JSON body: name, kind (user|service), platform_admin (platform-admins only), metrics_reader (platform-admins only: it may GET /metrics and nothing else; never with tenants or platform_admin), tenants {tenant: viewer|member|tenant-admin}. A tenant-admin may create identities only with roles in tenants it administers.", "responses": {"201": {"description": "Created"}, "400": {"description": "Invalid field"}, "403": {"description": "Not allowed"}, "409": {"description": "The name is taken"}}}
    },
    "/v1/identities/{name}/{action}": {"post": {"summary": "disable, enable, grant-platform-admin or revoke-platform-admin (platform-admins)", "responses": {"200": {"description": "The identity after"}, "404": {"description": "No such identity"}}}},
    "/v1/tenants/{tenant}/members": {
      "get": {"summary": "A tenant's members and roles (any member of the tenant)", "responses": {"200": {"description": "{\"tenant\", \"members\": [...]}"}, "404": {"description": "No such tenant, or not yours"}}},
      "post": {"summary": "Give an identity a role in the tenant (its tenant-admins)", "description": "JSON body: identity, role (viewer|member|tenant-admin).", "responses": {"200": {"description": "Set"}, "403": {"description": "Not a tenant-admin"}, "404": {"description": "No such tenant or identity"}}}
    },
    "/v1/tenants/{tenant}/members/{identity}/remove": {"post": {"summary": "Take an identity out of the tenant (its tenant-admins)", "responses": {"200": {"description": "Removed"}, "404": {"description": "Not a member"}}}},
    "/v1/tokens": {
      "get": {"summary": "The caller's tokens (or ?identity= one it manages); never their secrets", "description": "Newest first, a page at a time: next, present when more follow, is the cursor to pass as after (with the same identity).",
              "parameters": [{"name": "identity", "in": "query", "schema": {"type": "string"}},
                             {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 5000, "default": 500}, "description": "Tokens per page; above 5000 is refused with 400 naming limit"},
                             {"name": "after", "in": "query", "schema": {"type": "string"}, "description": "The next of the page before (opaque); absent: the first page"}],
              "responses": {"200": {"description": "{\"tokens\": [...], \"next\"}"}, "400": {"description": "A bad limit or after; error.field names it"}}},
      "post": {"summary": "Create a token, shown once in the answer's token field", "description": "JSON body: identity (default: the caller; others: platform-admins, or tenant-admins for service accounts of their tenants), ttl (1s to 400d, default 90d), description.", "responses": {"201": {"description": "The token"}, "404": {"description": "No identity you manage by that name"}}}
    },
    "/v1/tokens/{id}/revoke": {"post": {"summary": "Revoke a token at once (its identity, or whoever may manage that identity)", "responses": {"200": {"description": "Revoked"}, "404": {"description": "No token you manage by that id"}, "409": {"description": "Already revoked"}}}},
    "/v1/prices": {
      "get": {
        "summary": "The price table usage is costed with (docs/metering.md): the active version, or ?version=N, and the list of versions",
        "parameters": [{"name": "version", "in": "query", "schema": {"type": "integer"}}],
        "responses": {"200": {"description": "version, applied_ms, applied_by, yaml, table {currency, default, prices [{model, pool, per_gpu_hour}]}, versions, active"}, "404": {"description": "No such version"}}
      },
      "post": {
        "summary": "Apply a price table (YAML body) as the newest version, in effect from now; audited as price.apply",
        "parameters": [{"name": "comment", "in": "query", "schema": {"type": "string"}},
                       {"name": "base_version", "in": "query", "schema": {"type": "integer", "minimum": 1}, "description": "The version the table was written against: refused with 409 (field base_version) if another version was applied since"}],
        "responses": {"201": {"description": "{version}"}, "400": {"description": "Invalid table; error.field names the line"}, "409": {"description": "base_version is no longer the newest version; nothing changed"}}
      }
    },
    "/v1/usage": {
      "get": {
        "summary": "Usage grouped by tenant, queue, user, pool, model, node, day or month: allocated, used (utilization-weighted) and idle GPU-hours (exact mgpu_ms, used_mgpu_ms, idle_mgpu_ms), cost and idle cost (exact micros), runs and idle runs per row, and the total; telemetry says whether used/idle are measured",
        "parameters": [
          {"name": "by", "in": "query", "schema": {"type": "string"}, "description": "Comma-separated groupings; default tenant"},
          {"name": "from", "in": "query", "schema": {"type": "string"}, "description": "Epoch ms or a duration back from now; default the start of this UTC month"},
          {"name": "to", "in": "query", "schema": {"type": "string"}, "description": "Exclusive; default now"},
          {"name": "tenant", "in": "query", "schema": {"type": "string"}}
        ],
        "responses": {"200": {"description": "from_ms, to_ms, by, currency, rows [{key, mgpu_ms, allocated_gpu_hours, used_gpu_hours, idle_gpu_hours, cost_micros, cost, runs}], total, records"}, "400": {"description": "Bad grouping or window, or a window with more runs than berthd --report-max-rows (field from)"}}
      }
    },
    "/v1/usage/records": {
      "get": {
        "summary": "The usage records (one per run of each replica) clipped to the window, ordered by start then run id, paged with after (or offset) and limit; total covers every page. A window with more runs than berthd --report-max-rows is refused with 400 naming from",
        "parameters": [
          {"name": "from", "in": "query", "schema": {"type": "string"}},
          {"name": "to", "in": "query", "schema": {"type": "string"}},
          {"name": "tenant", "in": "query", "schema": {"type": "string"}},
          {"name": "offset", "in": "query", "schema": {"type": "integer"}, "description": "Records to skip; not with after"},
          {"name": "limit", "in": "query", "schema": {"type": "integer", "default": 500, "minimum": 1, "maximum": 5000}},
          {"name": "after", "in": "query", "schema": {"type": "string"}, "description": "The next of the page before (opaque)"},
          {"name": "job", "in": "query", "schema": {"type": "integer", "minimum": 1}, "description": "One job's records only (total is that job's GPU time and cost); a job outside the caller's tenants has none"}
        ],
        "responses": {"400": {"description": "Bad window, limit, offset, after or job, or a window over --report-max-rows (field from)"}, "200": {"description": "next (cursor, absent on the last page), records [{run_id, job_id, replica, attempt, tenant, queue, user, pool, node, gpu_uuids, gpu_model, mgpu, start_ms, end_ms, open, outcome, mgpu_ms, gpu_hours, cost_micros, cost, price_versions, measured_mgpu_ms, used_mgpu_ms, idle_mgpu_ms, used_cost_micros, idle_cost_micros, longest_idle_ms, idle}], total_records, next_offset, total"}}
      }
    },
    "/v1/reports/ops": {
      "get": {
        "summary": "The operations report of a window (docs/metering.md): GPU allocation against capacity, measured GPU and memory utilization when telemetry gives it, queue wait (average, p95, still waiting), runs by outcome and failures by class, evictions and the GPU-hours they lost, cost, and manual interventions; overall and per tenant. A caller who is not a platform-admin sees its tenants only and no fleet-wide figures",
        "parameters": [
          {"name": "from", "in": "query", "schema": {"type": "string"}, "description": "Epoch ms or a duration back from now; default 24 hours ago"},
          {"name": "to", "in": "query", "schema": {"type": "string"}, "description": "Exclusive; default now"}
        ],
        "responses": {"200": {"description": "from_ms, to_ms, currency, measured, fleet {gpus, capacity_mgpu_ms, alerts_opened, measured}, total, tenants [{tenant, jobs_submitted, jobs_failed, allocated_mgpu_ms, cost_micros, measured, wait, runs_finished, outcomes, runs_failed, failures_by_class, evictions, lost_mgpu_ms, interventions}], evictions, interventions_by_action, interventions"}, "400": {"description": "Bad window, or a window holding more stored rows (jobs, runs, audit records) than berthd --report-max-rows (field from; nothing partial is returned)"}}
      }
    },
    "/v1/queues": {
      "get": {
        "summary": "Each queue of the active policy in the caller's tenants with its GPU quota against what its Scheduled and Running jobs hold now (its own and its descendants'), in milli-GPUs",
        "parameters": [{"name": "tenant", "in": "query", "schema": {"type": "string"}, "description": "One tenant's queues only"}],
        "responses": {"200": {"description": "policy_version, queues [{queue, tenant, parent, kind, over_quota, used_mgpu, running_jobs, guaranteed_mgpu, borrow_limit_mgpu, lending_limit_mgpu, borrowed_mgpu, idle_guaranteed_mgpu, lendable_mgpu}]; the quota fields are null for a queue that declares no GPU quota"}}
      }
    },
    "/v1/budgets": {
      "get": {"summary": "Every tenant budget against this month's usage", "responses": {"200": {"description": "budgets [{tenant, unit, currency, limit, used, month, alerts, crossed, enforce, over}]"}}}
    },
    "/v1/budgets/{tenant}": {
      "post": {
        "summary": "Set a tenant's monthly budget (JSON body: gpu_hours or amount, alerts, enforce); audited as budget.set",
        "responses": {"200": {"description": "The budget"}, "400": {"description": "Invalid body; error.field names the field"}, "404": {"description": "Tenant not in the policy"}}
      },
      "delete": {
        "summary": "Remove a tenant's budget; audited as budget.delete",
        "responses": {"200": {"description": "Removed"}, "404": {"description": "No budget"}}
      }
    }
  },
  "components": {
    "schemas": {
      "QuotaRequestInput": {"type": "object", "required": ["queue", "resource", "reason"], "properties": {"queue": {"type": "string"}, "resource": {"type": "string"}, "guaranteed": {"type": "string"}, "borrow_limit": {"type": "string"}, "weight": {"type": "integer"}, "lending_limit": {"type": "string"}, "reason": {"type": "string"}}},
      "Service": {"type": "object", "properties": {"tenant": {"type": "string"}, "name": {"type": "string"}, "queue": {"type": "string"}, "revision": {"type": "integer"}, "applied": {"type": "string", "enum": ["created", "revised", "unchanged"], "description": "POST /v1/services only"}, "created_ms": {"type": "integer"}, "created_by": {"type": "string"}, "updated_ms": {"type": "integer"}, "updated_by": {"type": "string"}, "status": {"type": "object", "description": "Its replicas as stored and the service controller's last round", "properties": {"revision": {"type": "integer"}, "desired": {"type": "integer"}, "ready": {"type": "integer", "description": "Replicas of the current spec that run and pass their readiness probe"}, "not_ready": {"type": "integer", "description": "Running replicas, of any revision, not passing their readiness probe"}, "running": {"type": "integer"}, "starting": {"type": "integer"}, "stopping": {"type": "integer"}, "phase": {"type": "string", "enum": ["pending", "steady", "scaling", "rolling_out", "rollout_paused", "canary", "backing_off"]}, "backoff_until_ms": {"type": "integer", "nullable": true}, "recent_crashes": {"type": "integer"}, "refused": {"type": "string", "nullable": true, "description": "Why the last replica it tried to start was refused"}, "waiting": {"type": "string", "nullable": true, "description": "What the rollout or scale-up waits for: the current revision's replica not ready longest, for how long, and its probe's last outcome"}, "reconciled_ms": {"type": "integer"}, "endpoint": {"type": "string", "nullable": true, "description": "The URL the service is reached at through the gateway; null when berthd runs no gateway"}, "autoscale": {"type": "object", "nullable": true, "description": "The autoscaler's last decision; null when the bounds leave nothing to decide, without a gateway, or before a round", "properties": {"code": {"type": "string", "enum": ["stable", "panic", "stabilizing_up", "stabilizing_down", "idle", "scale_to_zero", "scale_from_zero", "held_by_min", "held_by_max", "no_data"]}, "signal": {"type": "string"}, "observed": {"type": "string", "description": "The window's service-wide average of the signal, a decimal"}, "target": {"type": "string", "description": "Per replica: target x target_utilization, a decimal"}, "desired": {"type": "integer"}, "reason": {"type": "string", "description": "The decision in words, with its numbers"}}}, "routed": {"type": "integer", "description": "Replicas in the gateway's route"}, "draining": {"type": "integer", "description": "Replicas leaving the route, finishing their requests before they stop"}, "traffic": {"type": "object", "nullable": true, "description": "The gateway's counters for the route at the last round; null without a gateway", "properties": {"in_flight": {"type": "integer", "description": "Requests at replicas now"}, "queued": {"type": "integer", "description": "Waiting for a replica's connection slot"}, "held": {"type": "integer", "description": "Held now because no replica is ready"}, "requests_total": {"type": "integer"}, "held_total": {"type": "integer"}, "held_expired_total": {"type": "integer", "description": "Held until the timeout, then answered 503"}, "responses_2xx": {"type": "integer"}, "responses_5xx": {"type": "integer"}, "window": {"type": "object", "nullable": true, "description": "The requests the gateway's log showed since the round before; percentiles are estimates within 4.5%, 0 when requests is 0", "properties": {"requests": {"type": "integer"}, "responses_5xx": {"type": "integer"}, "held": {"type": "integer"}, "p50_ms": {"type": "number"}, "p95_ms": {"type": "number"}, "p99_ms": {"type": "number"}}}}}, "cold_start_since_ms": {"type": "integer", "nullable": true, "description": "A scale from zero under way: since when a request is held"}, "session": {"type": "object", "nullable": true, "description": "A session's (kind session) limits as they stand; null for a service", "properties": {"expires_ms": {"type": "integer", "description": "When its maximum lifetime ends it"}, "max_lifetime_ms": {"type": "integer", "description": "The lifetime in force: the spec's session.max_lifetime, or its queue's max_session_lifetime when shorter"}, "idle_since_ms": {"type": "integer", "nullable": true, "description": "Its last activity (a request through the gateway, a GPU reading at or above the idle level, its replica's start); null while its replica does not run or before a round"}, "idle_ends_ms": {"type": "integer", "nullable": true, "description": "When it is culled if nothing happens; null with idle_window 0 or while not running"}}}, "canary": {"type": "object", "nullable": true, "description": "A canary step under way (rollout.canary); null otherwise", "properties": {"step": {"type": "integer", "description": "1-based"}, "steps": {"type": "integer"}, "weight_pct": {"type": "integer", "description": "Of the requests, to the current revision"}, "replicas": {"type": "integer", "description": "Of the current revision at this step"}, "ready": {"type": "boolean"}, "pause_ends_ms": {"type": "integer", "nullable": true, "description": "When the step ends on its own; null until its replicas are ready, or when it waits to be resumed"}, "awaiting_resume": {"type": "boolean"}}}, "last_cold_start": {"type": "object", "nullable": true, "description": "The last scale from zero measured since berthd started", "properties": {"job": {"type": "integer", "description": "The replica that took the held requests"}, "duration_ms": {"type": "integer", "description": "From the round that saw a request held to the round that put a ready replica in the route"}, "at_ms": {"type": "integer"}}}, "replicas": {"type": "array", "items": {"type": "object", "properties": {"job": {"type": "integer"}, "revision": {"type": "integer"}, "current": {"type": "boolean"}, "state": {"type": "string"}, "ready": {"type": "boolean", "description": "Running and passing its readiness probe, as its agent last said"}, "probe": {"type": "string", "nullable": true, "description": "Its probe's last outcome (GET /health: HTTP 503)"}, "not_ready_since_ms": {"type": "integer", "nullable": true}, "node": {"type": "string", "nullable": true}, "port": {"type": "integer", "nullable": true, "description": "The node's port it serves on, once started"}, "stopping": {"type": "boolean"}, "reason": {"nullable": true, "allOf": [{"$ref": "#/components/schemas/Reason"}], "description": "Why a replica that does not run waits (its job's reason); null when it runs"}}}}}}, "spec": {"type": "object", "description": "The spec in its canonical form (every field, defaults included)"}, "revisions": {"type": "array", "items": {"type": "object", "properties": {"revision": {"type": "integer"}, "change": {"type": "string", "enum": ["apply", "scale", "rollback"]}, "restores": {"type": "integer", "nullable": true}, "created_ms": {"type": "integer"}, "created_by": {"type": "string"}, "image": {"type": "string"}, "replicas": {"type": "object"}}}}}},
      "QuotaRequest": {"type": "object", "properties": {"id": {"type": "integer"}, "tenant": {"type": "string"}, "queue": {"type": "string"}, "resource": {"type": "string"}, "guaranteed": {"type": "string", "nullable": true}, "borrow_limit": {"type": "string", "nullable": true}, "weight": {"type": "integer", "nullable": true}, "lending_limit": {"type": "string", "nullable": true}, "reason": {"type": "string"}, "state": {"type": "string", "enum": ["Pending", "Approved", "Rejected", "Withdrawn"]}, "filed_by": {"type": "string"}, "filed_ms": {"type": "integer"}, "decided_by": {"type": "string"}, "decided_ms": {"type": "integer", "nullable": true}, "comment": {"type": "string"}, "policy_version": {"type": "integer", "nullable": true}}},
      "PreviewColumn": {"type": "object", "properties": {"jobs": {"type": "integer"}, "finished": {"type": "integer"}, "mean_wait_s": {"type": "number"}, "p95_wait_s": {"type": "number"}, "mean_jct_s": {"type": "number"}, "gpu_hours": {"type": "number"}, "evictions": {"type": "integer"}, "lost_gpu_hours": {"type": "number"}, "cost": {"type": "number", "nullable": true}}},
      "PreviewRow": {"type": "object", "properties": {"tenant": {"type": "string"}, "current": {"$ref": "#/components/schemas/PreviewColumn"}, "proposed": {"$ref": "#/components/schemas/PreviewColumn"}, "change": {"type": "object"}}},
      "PolicyPreview": {"type": "object", "properties": {
        "from": {"type": "integer"}, "to": {"type": "integer"}, "applied": {"type": "boolean"},
        "window": {"type": "object", "properties": {"duration": {"type": "string"}, "since_ms": {"type": "integer"}, "until_ms": {"type": "integer"}}},
        "jobs": {"type": "integer"}, "never_ran": {"type": "integer"}, "still_running": {"type": "integer"},
        "message": {"type": "string", "description": "Set when no job ran in the window; no figures then"},
        "cluster_gpus": {"type": "integer"}, "nodes": {"type": "integer"}, "priced": {"type": "boolean"},
        "unpriced_models": {"type": "array", "items": {"type": "string"}},
        "never_started": {"type": "object", "properties": {"current": {"type": "integer"}, "proposed": {"type": "integer"}}},
        "overall": {"$ref": "#/components/schemas/PreviewRow"},
        "tenants": {"type": "array", "items": {"$ref": "#/components/schemas/PreviewRow"}},
        "changes": {"type": "object"}}},
      "History": {"type": "object", "properties": {
        "format": {"type": "string", "enum": ["berth-history/1"]},
        "since_ms": {"type": "integer"}, "until_ms": {"type": "integer"}, "exported_ms": {"type": "integer"},
        "policy": {"type": "object", "properties": {"version": {"type": "integer"}, "yaml": {"type": "string"}}},
        "nodes": {"type": "array", "items": {"type": "object"}},
        "jobs": {"type": "array", "items": {"type": "object", "properties": {
          "id": {"type": "integer"}, "name": {"type": "string"}, "tenant": {"type": "string"}, "queue": {"type": "string"},
          "priority": {"type": "string"}, "replicas": {"type": "integer"}, "resources": {"type": "object"},
          "preemptible": {"type": "boolean", "nullable": true}, "max_runtime_ms": {"type": "integer"}, "pool": {"type": "string"},
          "state": {"type": "string"}, "submitted_ms": {"type": "integer"}, "started_ms": {"type": "integer", "nullable": true},
          "finished_ms": {"type": "integer", "nullable": true}, "exit_code": {"type": "integer", "nullable": true}, "signal": {"type": "integer", "nullable": true},
          "runs": {"type": "array", "items": {"type": "object", "properties": {
            "run_id": {"type": "string"}, "replica": {"type": "integer"}, "attempt": {"type": "integer"}, "node": {"type": "string"},
            "gpus": {"type": "array", "items": {"type": "integer"}}, "gpu_share_millis": {"type": "integer"}, "gpu_share_bytes": {"type": "integer"},
            "state": {"type": "string"}, "started_ms": {"type": "integer", "nullable": true}, "finished_ms": {"type": "integer", "nullable": true},
            "exit_code": {"type": "integer", "nullable": true}, "signal": {"type": "integer", "nullable": true},
            "stopped_for": {"type": "string"}, "start_error": {"type": "string"}}}}}}}}},
      "Error": {"type": "object", "properties": {"error": {"type": "object", "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "field": {"type": "string"}}, "required": ["code", "message"]}}},
      "JobSpecInput": {
        "type": "object", "additionalProperties": false, "required": ["name", "command"],
        "properties": {
          "name": {"type": "string", "maxLength": 63},
          "tenant": {"type": "string", "default": "default"},
          "queue": {"type": "string", "default": "default"},
          "command": {"type": "array", "items": {"type": "string"}, "minItems": 1},
          "args": {"type": "array", "items": {"type": "string"}},
          "env": {"type": "object", "additionalProperties": {"type": "string"}},
          "working_dir": {"type": "string", "description": "Absolute; must lie under a read-write storage grant of the tenant"},
          "mounts": {"type": "array", "maxItems": 64, "description": "Host paths the job uses, bind-mounted at the same path in a container; each under a storage grant of the tenant (read_only ones may use read-only grants)",
            "items": {"type": "object", "additionalProperties": false, "required": ["path"], "properties": {
              "path": {"type": "string"}, "read_only": {"type": "boolean", "default": false}}}},
          "replicas": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 1},
          "resources": {"type": "object", "additionalProperties": false, "properties": {
            "gpus": {"type": "integer", "minimum": 0, "maximum": 64},
            "gpu_model": {"type": "string"},
            "gpu_memory": {"type": "string", "example": "80Gi"},
            "cpu": {"type": "string", "example": "16"},
            "memory": {"type": "string", "example": "128Gi"}}},
          "priority": {"type": "string", "enum": ["low", "normal", "high", "critical"]},
          "max_runtime": {"type": "string", "example": "12h"},
          "array": {"description": "Submit a job array: a count (100), an inclusive range of indices (\"0-9999\"), or a list of parameter sets, each env added to one element; at most 100000 elements. Each element gets BERTH_ARRAY_ID, BERTH_ARRAY_INDEX and BERTH_ARRAY_SIZE.",
            "oneOf": [{"type": "integer", "minimum": 1, "maximum": 100000}, {"type": "string", "example": "0-9999"},
                      {"type": "array", "minItems": 1, "maxItems": 100000, "items": {"type": "object", "additionalProperties": {"type": "string"}}}]}
        }
      },
      "Reason": {"type": "object", "properties": {"code": {"type": "string"}, "counts": {"type": "object", "additionalProperties": {"type": "integer"}}, "detail": {"type": "string"}, "message": {"type": "string"},
        "forecast": {"type": "object", "description": "GET /v1/jobs/{id}/why of a pending job only, when berthd's latest forecast (its scheduler run forward over declared and predicted ends, no new arrivals; made at most once per --forecast-interval, never stored) foresaw a start for it", "properties": {
          "start_ms": {"type": "integer"}, "made_at_ms": {"type": "integer"}, "basis": {"type": "string", "enum": ["declared", "predicted"]}, "cycles": {"type": "integer"}}},
        "hint": {"type": "string", "description": "GET /v1/jobs/{id}/why only, when the reason carries a verified \"would run now if\" (NoNodeFits, Fragmented): that change alone in the language asked for, e.g. \"it would run now with gpu_model H100-80GB\"; the message ends with it too"},
        "layers": {"type": "array", "description": "GET /v1/jobs/{id}/why of a pending job only: what holds it back, the layer holding it now first, then the node layer when that is not the nodes", "items": {"type": "object", "properties": {
          "layer": {"type": "string", "enum": ["order", "quota", "budget", "nodes", "not_looked_at_yet"]}, "code": {"type": "string"},
          "nodes": {"type": "integer"}, "could_take": {"type": "integer", "description": "nodes that could ever take a replica, whatever is free now"},
          "excluded": {"type": "array", "description": "static node causes, least change first: the most nodes opened by lifting the cause alone, then the most nodes ruled out", "items": {"type": "object", "properties": {"cause": {"type": "string"}, "nodes": {"type": "integer", "description": "nodes the cause rules out (a node counts under each of its causes)"}, "alone": {"type": "integer", "description": "nodes where it is the only cause: lifting it alone would open them"}}}}}}}}},
      "Utilization": {"type": "object", "nullable": true, "description": "GPU readings summed over a window; null without samples", "properties": {
        "avg_util_pct": {"type": "number"}, "max_util_pct": {"type": "integer"}, "avg_memory_used_bytes": {"type": "number"}, "max_memory_used_bytes": {"type": "integer"},
        "memory_total_bytes": {"type": "integer"}, "idle_fraction": {"type": "number", "description": "Share of samples under berthd's --idle-threshold"},
        "longest_idle_ms": {"type": "integer", "description": "Longest stretch in which every GPU's bucket was idle"},
        "samples": {"type": "integer"}, "first_ms": {"type": "integer"}, "last_ms": {"type": "integer"}}},
      "TelemetryBucket": {"type": "object", "properties": {
        "start_ms": {"type": "integer"}, "width_ms": {"type": "integer"}, "run_ids": {"type": "array", "items": {"type": "string"}}, "shared": {"type": "boolean"},
        "samples": {"type": "integer"}, "util_sum": {"type": "integer"}, "avg_util_pct": {"type": "number"}, "max_util_pct": {"type": "integer"},
        "avg_mem_util_pct": {"type": "number"}, "avg_memory_used_bytes": {"type": "number"}, "max_memory_used_bytes": {"type": "integer"}, "memory_total_bytes": {"type": "integer"},
        "max_temperature_c": {"type": "integer"}, "avg_power_w": {"type": "number"}, "ecc_dbe": {"type": "integer"}, "last_xid": {"type": "integer"}, "idle_samples": {"type": "integer"}}},
      "Job": {"type": "object", "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"}, "tenant": {"type": "string"}, "queue": {"type": "string"},
        "state": {"type": "string", "enum": ["Pending", "Scheduled", "Running", "Succeeded", "Failed", "Cancelled"]},
        "reason": {"$ref": "#/components/schemas/Reason"},
        "submitted_at_ms": {"type": "integer"}, "started_at_ms": {"type": "integer", "nullable": true}, "finished_at_ms": {"type": "integer", "nullable": true},
        "exit_code": {"type": "integer", "nullable": true}, "signal": {"type": "integer", "nullable": true},
        "cancel_requested": {"type": "boolean"},
        "policy_version": {"type": "integer", "nullable": true, "description": "The policy version the job was last scheduled under"},
        "spec": {"type": "object"},
        "array": {"type": ["object", "null"], "description": "For an element of a job array: the array's id (its first element's job id), this element's index and the array's size; in a submission's answer also jobs.first and jobs.last", "properties": {"id": {"type": "integer"}, "index": {"type": "integer"}, "size": {"type": "integer"}}},
        "service": {"type": ["object", "null"], "description": "For a replica of an inference service: the service's name (in the job's tenant) and the revision that started it. Set by berthd only; a replica is not cancelled through the job (409): scale or delete its service", "properties": {"name": {"type": "string"}, "revision": {"type": "integer"}}},
        "placement": {"type": "array", "description": "The runs of the current attempt", "items": {"$ref": "#/components/schemas/Run"}},
        "runs": {"type": "array", "description": "Every attempt's runs (job detail only)", "items": {"$ref": "#/components/schemas/Run"}},
        "timeline": {"type": "array", "items": {"type": "object", "properties": {"time_ms": {"type": "integer"}, "state": {"type": "string"}, "event": {"type": "string"}, "message": {"type": "string"}, "policy_version": {"type": "integer", "nullable": true}}}},
        "utilization": {"$ref": "#/components/schemas/Utilization"}
      }},
      "Run": {"type": "object", "properties": {
        "replica": {"type": "integer"}, "attempt": {"type": "integer"}, "run_id": {"type": "string"}, "node": {"type": "string"},
        "gpus": {"type": "array", "items": {"type": "integer"}}, "gpu_uuids": {"type": "array", "items": {"type": "string"}},
        "gpu_share_mgpu": {"type": "integer", "description": "A slice of its one GPU (0: whole GPUs)"}, "gpu_share_bytes": {"type": "integer"},
        "state": {"type": "string", "enum": ["Starting", "Running", "Exited"]}, "pid": {"type": "integer", "nullable": true},
        "port": {"type": "integer", "nullable": true, "description": "A service replica's port on its node"},
        "exit_code": {"type": "integer", "nullable": true}, "signal": {"type": "integer", "nullable": true},
        "stopped_for": {"type": "string"}, "start_error": {"type": "string"},
        "clean_stop": {"type": "boolean", "nullable": true, "description": "Stopped by Berth: true when it exited within its grace period after the stop signal, false when it was killed"},
        "last_checkpoint_ms": {"type": "integer", "nullable": true, "description": "Its checkpoint file's last change, unix ms"},
        "started_at_ms": {"type": "integer", "nullable": true}, "finished_at_ms": {"type": "integer", "nullable": true}}},
      "Why": {"type": "object", "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"}, "tenant": {"type": "string"}, "queue": {"type": "string"},
        "state": {"type": "string", "enum": ["Pending", "Scheduled", "Running", "Succeeded", "Failed", "Cancelled"]},
        "lang": {"type": "string", "enum": ["en", "zh"]},
        "reason": {"$ref": "#/components/schemas/Reason"},
        "timeline": {"type": "array", "items": {"type": "object", "properties": {"time_ms": {"type": "integer"}, "state": {"type": "string"}, "event": {"type": "string"}, "message": {"type": "string"}, "policy_version": {"type": "integer", "nullable": true}}}}
      }},
      "PolicyVersion": {"type": "object", "properties": {
        "version": {"type": "integer"}, "active": {"type": "boolean"}, "applied_at_ms": {"type": "integer"}, "applied_by": {"type": "string"}, "comment": {"type": "string"},
        "rolled_back_from": {"type": "integer", "nullable": true, "description": "Made by a rollback: the version that was active then"},
        "restores": {"type": "integer", "nullable": true, "description": "Made by a rollback: the version whose text it restores"},
        "yaml": {"type": "string", "description": "As applied (single-version answers only)"},
        "normalized": {"type": "string", "description": "Canonical form, what diffs compare (single-version answers only)"},
        "policy": {"type": "object", "description": "Parsed (single-version answers only)", "properties": {
          "usage_half_life_ms": {"type": "integer"}, "min_runtime_ms": {"type": "integer"}, "reclaim_grace_ms": {"type": "integer"}, "short_first_max_wait_ms": {"type": "integer"},
          "retry_max_attempts": {"type": "integer", "nullable": true, "description": "The cap on every queue's jobs' attempts (retry.max_attempts); null: none"},
          "pools": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "selector": {"type": "object", "additionalProperties": {"type": "string"}}, "inference_headroom_gpus": {"type": "integer"}}}},
          "priority_classes": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "integer"}, "preemptible": {"type": "boolean"}}}},
          "queues": {"type": "array", "items": {"type": "object", "properties": {
            "path": {"type": "string"}, "tenant": {"type": "string"}, "parent": {"type": "string"}, "kind": {"type": "string"}, "pools": {"type": "array", "items": {"type": "string"}},
            "over_quota": {"type": "string", "enum": ["borrow", "wait", "reject"]}, "preemptible": {"type": "boolean"}, "max_session_lifetime_ms": {"type": "integer", "nullable": true, "description": "Kind interactive: the longest a session of the queue lives"},
            "retry_max_attempts": {"type": "integer", "nullable": true, "description": "The queue's own cap on its jobs' attempts (retry.max_attempts), over the top level's; null: none"},
            "quota": {"type": "object", "description": "Keyed by resource (gpus, gpus/MODEL, gpu_memory, cpu, memory); amounts in milli-GPUs, bytes or millicores", "additionalProperties": {"type": "object", "properties": {
              "guaranteed": {"type": "integer"}, "borrow_limit": {"type": "integer", "nullable": true}, "weight": {"type": "integer"}, "lending_limit": {"type": "integer"}}}}}}}}}}},
      "PolicyDiff": {"type": "object", "properties": {
        "dry_run": {"type": "boolean", "description": "Present (true) on POST /v1/policy?dry_run=true answers; to is the version the policy would get"},
        "from": {"type": "integer"}, "to": {"type": "integer"}, "diff": {"type": "string", "description": "Unified diff of the normalised YAML; empty when equal"},
        "changes": {"type": "object", "properties": {
          "queues_added": {"type": "array", "items": {"type": "string"}}, "queues_removed": {"type": "array", "items": {"type": "string"}},
          "quota_changes": {"type": "array", "items": {"type": "object", "properties": {"queue": {"type": "string"}, "resource": {"type": "string"}, "field": {"type": "string"}, "from": {"type": "integer", "nullable": true}, "to": {"type": "integer", "nullable": true}}}},
          "queue_changes": {"type": "array", "items": {"type": "object", "properties": {"queue": {"type": "string"}, "field": {"type": "string"}, "from": {}, "to": {}}}},
          "settings_changed": {"type": "array", "items": {"type": "string"}}}}}},
      "Node": {"type": "object", "properties": {
        "name": {"type": "string"}, "hostname": {"type": "string"}, "address": {"type": "string", "description": "where the gateway reaches service replicas on this node"}, "state": {"type": "string", "enum": ["Ready", "NotReady"]},
        "connected": {"type": "boolean"}, "last_heartbeat_ms": {"type": "integer"}, "labels": {"type": "object"}, "taints": {"type": "array"},
        "cpus": {"type": "integer"}, "memory_bytes": {"type": "integer"}, "driver_version": {"type": "string"}, "cuda_version": {"type": "string"},
        "gpu_provider": {"type": "string"}, "gpus_total": {"type": "integer"}, "gpus_free": {"type": "integer"}, "models": {"type": "array", "items": {"type": "string"}}}},
      "Gpu": {"type": "object", "properties": {
        "node": {"type": "string"}, "index": {"type": "integer"}, "uuid": {"type": "string"}, "model": {"type": "string"}, "memory_bytes": {"type": "integer"},
        "health": {"type": "string"}, "health_detail": {"type": "string"}, "nvlink_island": {"type": "integer"}, "numa_node": {"type": "integer"},
        "job": {"type": "object", "nullable": true, "description": "The whole-GPU run holding it", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "tenant": {"type": "string"}, "queue": {"type": "string"}, "replica": {"type": "integer"}, "run_id": {"type": "string"}}},
        "sharing": {"type": "object", "nullable": true, "description": "Null outside sharing mode; else what the GPU's slices hold", "properties": {
          "used_mgpu": {"type": "integer"}, "used_memory_bytes": {"type": "integer"}, "free_memory_bytes": {"type": "integer"},
          "holders": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "tenant": {"type": "string"}, "queue": {"type": "string"}, "replica": {"type": "integer"}, "run_id": {"type": "string"}, "gpu_share_mgpu": {"type": "integer"}, "gpu_memory_bytes": {"type": "integer"}}}}}}}}
    }
  }
})json";
  return kDoc;
}

}  // namespace berth::server
