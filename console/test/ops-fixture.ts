// An operations report as berthd answers GET /v1/reports/ops to a platform
// admin: two tenants, a service with requests, an eviction and interventions.
// The figures are chosen so each formatted cell is known: blue's 3 GPU-hours
// of 8 GPUs over 24 hours is 1.6% allocation, and so on.
import type { OpsFigures, OpsReport } from '../src/api';

const H = 3_600_000_000; // mGPU-ms in a GPU-hour

export function figures(extra: Partial<OpsFigures> = {}): OpsFigures {
  return {
    allocated_mgpu_ms: 3 * H,
    allocated_gpu_hours: 3,
    allocation_pct: 1.5625,
    cost_micros: 7_500_000,
    cost: '7.50',
    records: 2,
    measured: null,
    wait: { started: 4, total_wait_ms: 6000, avg_wait_ms: 1500, p95_wait_ms: 90_000, max_wait_ms: 90_000, waiting: 1, oldest_wait_ms: 330_000, oldest_job_id: 40 },
    runs_finished: 8,
    outcomes: { succeeded: 6, failed: 1, reclaimed: 1 },
    runs_failed: 1,
    failure_rate_pct: 12.5,
    failures_by_class: { user_code: 1 },
    evictions: { reclaimed: 1 },
    lost_mgpu_ms: H / 10,
    lost_gpu_hours: 0.1,
    interventions: 2,
    ...extra,
  };
}

export function opsReport(extra: Partial<OpsReport> = {}): OpsReport {
  return {
    from_ms: Date.UTC(2026, 10, 30, 12, 0, 0),
    to_ms: Date.UTC(2026, 11, 1, 12, 0, 0),
    currency: 'EUR',
    measured: false,
    fleet: { gpus: 8, capacity_mgpu_ms: 8 * 24 * H, capacity_gpu_hours: 192, measured: null },
    total: figures(),
    tenants: [
      figures({ tenant: 'blue' }),
      figures({
        tenant: 'red',
        allocated_mgpu_ms: 0,
        cost: '0.00',
        wait: { started: 0, total_wait_ms: 0, avg_wait_ms: 0, p95_wait_ms: 0, max_wait_ms: 0, waiting: 0, oldest_wait_ms: 0, oldest_job_id: null },
        runs_finished: 0,
        runs_failed: 0,
        outcomes: {},
        failures_by_class: {},
        evictions: {},
        lost_mgpu_ms: 0,
        interventions: 0,
      }),
    ],
    inference: {
      ...figures(),
      services: [
        {
          ...figures(),
          tenant: 'blue',
          service: 'chat',
          requests: { requests: 2000, responses_2xx: 1960, responses_4xx: 0, responses_5xx: 40, held: 3, p50_ms: 12.4, p95_ms: 80, p99_ms: 140.6, max_ms: 300, slo_windows: 10, slo_windows_met: 9 },
        },
      ],
    },
    evictions: [
      { time_ms: Date.UTC(2026, 10, 30, 13, 0, 0), run_id: '38.0.1', job_id: 38, job_name: 'nlp-ok', tenant: 'blue', kind: 'reclaimed', mgpu: 1000, lost_from_ms: 1, lost_since: 'start', lost_mgpu_ms: H / 10, lost_gpu_hours: 0.1 },
    ],
    interventions_by_action: { 'node.cordon': 1, 'alert.resolve': 1 },
    interventions: [
      { time_ms: Date.UTC(2026, 10, 30, 14, 0, 0), actor: 'root', action: 'node.cordon', object: 'node/n1', tenant: '' },
      { time_ms: Date.UTC(2026, 10, 30, 15, 0, 0), actor: 'root', action: 'alert.resolve', object: 'alert/3', tenant: '' },
    ],
    ...extra,
  };
}
