// The alerts view's logic, kept out of the page so it can be tested alone:
// the filters GET /v1/alerts takes (open or all, one kind) in the console's
// URL and in the API's query, the order the page shows (newest first, while
// berthd sends each page oldest first), what an alert names (node, GPU, job)
// and a rule's parameters in words.

import type { Alert, AlertRule, Caller } from './api';

// The kinds an alert can have (src/model/alert_kind.h), in the order the
// filter offers them. berthd answers a kind it does not know with no alerts.
export const ALERT_KINDS = ['gpu_hardware', 'node_not_ready', 'queue_wait', 'budget', 'idle_allocation', 'service_slo'] as const;
export const SEVERITIES = ['critical', 'warning', 'info'] as const;

export interface AlertFilters {
  all: boolean; // resolved ones too (GET /v1/alerts?all=true)
  kind: string; // '' for any
}

export const NO_ALERT_FILTERS: AlertFilters = { all: false, kind: '' };

// The filters of a console URL (/ui/alerts?state=all&kind=queue_wait). A
// value the console cannot read (state=maybe, an unknown kind) is dropped,
// not refused.
export function parseAlertFilters(search: string): AlertFilters {
  const p = new URLSearchParams(search);
  const kind = p.get('kind') ?? '';
  return {
    all: p.get('state') === 'all',
    kind: (ALERT_KINDS as readonly string[]).includes(kind) ? kind : '',
  };
}

// The filters as the console's own query (open, the default, left out).
export function alertFilterParams(f: AlertFilters): URLSearchParams {
  const p = new URLSearchParams();
  if (f.all) p.set('state', 'all');
  if (f.kind) p.set('kind', f.kind);
  return p;
}

// GET /v1/alerts's query: all, kind, the page size and where the page starts
// (`after`, the previous page's `next`, passed unchanged).
export function alertsQuery(f: AlertFilters, page: { limit: number; after?: string }): string {
  const p = new URLSearchParams();
  if (f.all) p.set('all', 'true');
  if (f.kind) p.set('kind', f.kind);
  p.set('limit', String(page.limit));
  if (page.after) p.set('after', page.after);
  return p.toString();
}

// The rows after one more page, newest first: berthd sends a page oldest
// first and the next page holds older alerts; an alert listed twice (it
// moved between pages, or was resolved since) is kept once, in its newest
// form. Ids grow with time, so newest first is highest id first.
export function mergeAlerts(shown: readonly Alert[], page: readonly Alert[]): Alert[] {
  const byId = new Map<number, Alert>();
  for (const a of shown) byId.set(a.id, a);
  for (const a of page) byId.set(a.id, a);
  return [...byId.values()].sort((x, y) => y.id - x.id);
}

// The job an alert's message names ("queue blue/main: job 12 has waited
// ...", "job 7 (tenant blue) run 7.0.1 ..."), or null. berthd's alert has
// no job field; its messages name the job this way.
export function jobOf(alert: Pick<Alert, 'message'>): number | null {
  const m = /\bjob (\d+)\b/.exec(alert.message);
  return m ? Number(m[1]) : null;
}

// Whether the Resolve button shows: a platform admin (the server allows no
// one else) and an alert still open. The server decides anyway.
export function canResolve(caller: Caller, alert: Pick<Alert, 'resolved_ms'>): boolean {
  return caller.platform_admin && alert.resolved_ms === null;
}

// A duration as a rules document writes it when it is whole (120000 ->
// "2m", 90000 -> "90s"), else in milliseconds.
export function ruleDuration(ms: number): string {
  const units: [string, number][] = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ];
  if (ms === 0) return '0s';
  for (const [u, n] of units) if (ms % n === 0) return `${ms / n}${u}`;
  return `${ms}ms`;
}

export type RuleParam = 'for' | 'queue' | 'service' | 'threshold' | 'window';

// A rule's parameters as its kind has them (docs/operations.md, "Alerts"),
// each with its value in the rules document's own notation.
export function ruleParams(rule: AlertRule): { param: RuleParam; value: string }[] {
  const out: { param: RuleParam; value: string }[] = [];
  if (rule.for_ms !== undefined) out.push({ param: 'for', value: ruleDuration(rule.for_ms) });
  if (rule.queue !== undefined) out.push({ param: 'queue', value: rule.queue });
  if (rule.service !== undefined) out.push({ param: 'service', value: rule.service });
  if (rule.threshold_ms !== undefined) out.push({ param: 'threshold', value: ruleDuration(rule.threshold_ms) });
  if (rule.threshold_percent !== undefined) out.push({ param: 'threshold', value: `${rule.threshold_percent}%` });
  if (rule.threshold !== undefined) out.push({ param: 'threshold', value: `${rule.threshold}×` });
  if (rule.window_ms !== undefined) out.push({ param: 'window', value: ruleDuration(rule.window_ms) });
  return out;
}
