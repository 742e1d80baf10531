import { describe, expect, it } from 'vitest';
import type { Alert, Caller } from '../src/api';
import {
  alertFilterParams,
  alertsQuery,
  canResolve,
  jobOf,
  mergeAlerts,
  NO_ALERT_FILTERS,
  parseAlertFilters,
  ruleDuration,
  ruleParams,
} from '../src/alerts';

const alert = (id: number, extra: Partial<Alert> = {}): Alert => ({
  id,
  kind: 'queue_wait',
  severity: 'warning',
  node: '',
  gpu: null,
  message: `queue blue/main: job ${id * 10} has waited 2s (threshold 1s), reason NoNodeFits`,
  raised_ms: id * 1000,
  resolved_ms: null,
  resolved_by: '',
  rule: 'waits',
  subject: 'blue/main',
  ...extra,
});

const caller = (extra: Partial<Caller>): Caller => ({ name: 'x', kind: 'user', platform_admin: false, tenants: {}, console: null, ...extra });

describe('the alerts filters', () => {
  it('round-trip through the console URL and leave out the defaults', () => {
    expect(parseAlertFilters('')).toEqual(NO_ALERT_FILTERS);
    const f = parseAlertFilters('?state=all&kind=node_not_ready');
    expect(f).toEqual({ all: true, kind: 'node_not_ready' });
    expect(alertFilterParams(f).toString()).toBe('state=all&kind=node_not_ready');
    expect(alertFilterParams(NO_ALERT_FILTERS).toString()).toBe('');
  });

  it('drop what they cannot read instead of refusing it', () => {
    expect(parseAlertFilters('?state=maybe&kind=volcano')).toEqual(NO_ALERT_FILTERS);
  });

  it('become GET /v1/alerts parameters: all=true, kind, limit and the cursor as given', () => {
    expect(alertsQuery(NO_ALERT_FILTERS, { limit: 50 })).toBe('limit=50');
    expect(alertsQuery({ all: true, kind: 'budget' }, { limit: 50, after: 'c/2+=' })).toBe(
      'all=true&kind=budget&limit=50&after=c%2F2%2B%3D',
    );
  });
});

describe('the alerts list', () => {
  it('shows newest first although each page comes oldest first, older pages after', () => {
    const first = mergeAlerts([], [alert(8), alert(9), alert(10)]);
    expect(first.map((a) => a.id)).toEqual([10, 9, 8]);
    const both = mergeAlerts(first, [alert(5), alert(6), alert(7)]);
    expect(both.map((a) => a.id)).toEqual([10, 9, 8, 7, 6, 5]);
  });

  it('keeps an alert listed twice once, in its newest form', () => {
    const shown = mergeAlerts([], [alert(1), alert(2)]);
    const resolved = alert(2, { resolved_ms: 5000, resolved_by: 'root' });
    const after = mergeAlerts(shown, [resolved]);
    expect(after.map((a) => [a.id, a.resolved_by])).toEqual([
      [2, 'root'],
      [1, ''],
    ]);
  });

  it('finds the job a message names, and none where it names none', () => {
    expect(jobOf(alert(1))).toBe(10);
    expect(jobOf({ message: 'job 7 (tenant blue) run 7.0.1 on n1 GPUs [0] has used under 5% of its GPUs for 30m' })).toBe(7);
    expect(jobOf({ message: 'node n1 has been NotReady for 2m (since ...)' })).toBeNull();
    expect(jobOf({ message: 'tenant blue crossed 80% of its budget (jobs 3)' })).toBeNull();
  });

  it('offers Resolve to a platform admin on an open alert only', () => {
    const admin = caller({ platform_admin: true });
    expect(canResolve(admin, alert(1))).toBe(true);
    expect(canResolve(admin, alert(1, { resolved_ms: 1 }))).toBe(false);
    expect(canResolve(caller({ tenants: { blue: 'tenant-admin' } }), alert(1))).toBe(false);
  });
});

describe('alert rules', () => {
  it('write durations as a rules document does', () => {
    expect(ruleDuration(120000)).toBe('2m');
    expect(ruleDuration(1_800_000)).toBe('30m');
    expect(ruleDuration(90_000)).toBe('90s');
    expect(ruleDuration(86_400_000)).toBe('1d');
    expect(ruleDuration(1500)).toBe('1500ms');
    expect(ruleDuration(0)).toBe('0s');
  });

  it("list each kind's parameters", () => {
    const base = { severity: 'warning', enabled: true, sinks: [] };
    expect(ruleParams({ ...base, name: 'g', kind: 'gpu_health' })).toEqual([]);
    expect(ruleParams({ ...base, name: 'n', kind: 'node_not_ready', for_ms: 120000 })).toEqual([{ param: 'for', value: '2m' }]);
    expect(ruleParams({ ...base, name: 'q', kind: 'queue_wait', queue: 'blue/main', threshold_ms: 1000 })).toEqual([
      { param: 'queue', value: 'blue/main' },
      { param: 'threshold', value: '1s' },
    ]);
    expect(ruleParams({ ...base, name: 'i', kind: 'idle_allocation', threshold_percent: 5, window_ms: 1_800_000 })).toEqual([
      { param: 'threshold', value: '5%' },
      { param: 'window', value: '30m' },
    ]);
    expect(ruleParams({ ...base, name: 's', kind: 'service_slo', service: '*', threshold: 14.4, window_ms: 3_600_000 })).toEqual([
      { param: 'service', value: '*' },
      { param: 'threshold', value: '14.4×' },
      { param: 'window', value: '1h' },
    ]);
  });
});
