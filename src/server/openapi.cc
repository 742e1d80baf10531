#include "server/openapi.h"

namespace berth::server {

std::string_view OpenApiDocument() {
  static constexpr std::string_view kDoc = R"json({
  "openapi": "3.0.3",
  "info": {
    "title": "Berth API",
    "version": "0.1.0",
    "description": "Berth's control-plane API: submit and manage GPU jobs, read the inventory. Errors are {\"error\": {\"code\", \"message\", \"field\"}} where field names the offending input."
  },
  "paths": {
    "/healthz": {"get": {"summary": "Liveness", "responses": {"200": {"description": "berthd is serving"}}}},
    "/v1/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3 document"}}}},
    "/v1/jobs": {
      "post": {
        "summary": "Submit a job",
        "description": "The body is a job spec in YAML or JSON (docs/jobs.md). The job is acknowledged (201) only once it is durable.",
        "requestBody": {"required": true, "content": {"application/yaml": {"schema": {"$ref": "#/components/schemas/JobSpecInput"}}, "application/json": {"schema": {"$ref": "#/components/schemas/JobSpecInput"}}}},
        "responses": {
          "201": {"description": "Accepted and stored", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}},
          "400": {"description": "Invalid spec; nothing stored", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
          "413": {"description": "Body over 1 MiB"}
        }
      },
      "get": {
        "summary": "List jobs, newest first",
        "parameters": [
          {"name": "state", "in": "query", "schema": {"type": "string"}, "description": "Comma-separated states: Pending, Scheduled, Running, Succeeded, Failed, Cancelled"},
          {"name": "tenant", "in": "query", "schema": {"type": "string"}},
          {"name": "queue", "in": "query", "schema": {"type": "string"}},
          {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 1000}}
        ],
        "responses": {"200": {"description": "Jobs", "content": {"application/json": {"schema": {"type": "object", "properties": {"jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}}}}}}}}
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
        "responses": {"200": {"description": "The job after the request", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}}, "404": {"description": "No such job"}, "409": {"description": "Already finished"}}
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
    "/v1/nodes": {"get": {"summary": "Nodes with lease state and GPU counts", "responses": {"200": {"description": "Nodes", "content": {"application/json": {"schema": {"type": "object", "properties": {"nodes": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}}}}},
    "/v1/gpus": {"get": {"summary": "Every GPU with its health and the job holding it", "responses": {"200": {"description": "GPUs", "content": {"application/json": {"schema": {"type": "object", "properties": {"gpus": {"type": "array", "items": {"$ref": "#/components/schemas/Gpu"}}}}}}}}}}
  },
  "components": {
    "schemas": {
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
          "working_dir": {"type": "string"},
          "replicas": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 1},
          "resources": {"type": "object", "additionalProperties": false, "properties": {
            "gpus": {"type": "integer", "minimum": 0, "maximum": 64},
            "gpu_model": {"type": "string"},
            "gpu_memory": {"type": "string", "example": "80Gi"},
            "cpu": {"type": "string", "example": "16"},
            "memory": {"type": "string", "example": "128Gi"}}},
          "priority": {"type": "string", "enum": ["low", "normal", "high", "critical"]},
          "max_runtime": {"type": "string", "example": "12h"}
        }
      },
      "Reason": {"type": "object", "properties": {"code": {"type": "string"}, "counts": {"type": "object", "additionalProperties": {"type": "integer"}}, "detail": {"type": "string"}, "message": {"type": "string"}}},
      "Job": {"type": "object", "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"}, "tenant": {"type": "string"}, "queue": {"type": "string"},
        "state": {"type": "string", "enum": ["Pending", "Scheduled", "Running", "Succeeded", "Failed", "Cancelled"]},
        "reason": {"$ref": "#/components/schemas/Reason"},
        "submitted_at_ms": {"type": "integer"}, "started_at_ms": {"type": "integer", "nullable": true}, "finished_at_ms": {"type": "integer", "nullable": true},
        "exit_code": {"type": "integer", "nullable": true}, "signal": {"type": "integer", "nullable": true},
        "cancel_requested": {"type": "boolean"},
        "spec": {"type": "object"},
        "placement": {"type": "array", "items": {"type": "object", "properties": {
          "replica": {"type": "integer"}, "attempt": {"type": "integer"}, "run_id": {"type": "string"}, "node": {"type": "string"},
          "gpus": {"type": "array", "items": {"type": "integer"}}, "gpu_uuids": {"type": "array", "items": {"type": "string"}},
          "state": {"type": "string", "enum": ["Starting", "Running", "Exited"]}, "pid": {"type": "integer", "nullable": true},
          "exit_code": {"type": "integer", "nullable": true}, "signal": {"type": "integer", "nullable": true},
          "stopped_for": {"type": "string"}, "start_error": {"type": "string"}}}},
        "timeline": {"type": "array", "items": {"type": "object", "properties": {"time_ms": {"type": "integer"}, "state": {"type": "string"}, "event": {"type": "string"}, "message": {"type": "string"}}}}
      }},
      "Node": {"type": "object", "properties": {
        "name": {"type": "string"}, "hostname": {"type": "string"}, "state": {"type": "string", "enum": ["Ready", "NotReady"]},
        "connected": {"type": "boolean"}, "last_heartbeat_ms": {"type": "integer"}, "labels": {"type": "object"}, "taints": {"type": "array"},
        "cpus": {"type": "integer"}, "memory_bytes": {"type": "integer"}, "driver_version": {"type": "string"}, "cuda_version": {"type": "string"},
        "gpu_provider": {"type": "string"}, "gpus_total": {"type": "integer"}, "gpus_free": {"type": "integer"}, "models": {"type": "array", "items": {"type": "string"}}}},
      "Gpu": {"type": "object", "properties": {
        "node": {"type": "string"}, "index": {"type": "integer"}, "uuid": {"type": "string"}, "model": {"type": "string"}, "memory_bytes": {"type": "integer"},
        "health": {"type": "string"}, "health_detail": {"type": "string"}, "nvlink_island": {"type": "integer"}, "numa_node": {"type": "integer"},
        "job": {"type": "object", "nullable": true, "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "tenant": {"type": "string"}, "queue": {"type": "string"}, "replica": {"type": "integer"}, "run_id": {"type": "string"}}}}}
    }
  }
})json";
  return kDoc;
}

}  // namespace berth::server
