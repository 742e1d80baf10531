// The policy view's logic, kept out of the pages so it can be tested
// alone: who may change what, a unified diff as rows, the structured change
// summary and a preview's figures in the units people read, where in the
// YAML a refusal points, and the one edit a tenant-admin makes (a queue's
// GPU guarantee and borrow limit) written into the policy text.
//
// Berth decides everything here again: a platform admin may apply, preview
// and roll back any policy; a tenant-admin may apply only a policy that
// changes nothing but the queues below its tenants' top-level queues (a
// tenant's own queue is changed by a quota request); everyone signed in may
// read the versions and their diffs (src/api/api_policy.cc).

import type { Caller, PolicyChanges, PolicyQueue, PolicyVersionInfo, PreviewEntry, PreviewFigures } from './api';
import { gpus } from './tenant';

export function canApplyAny(caller: Caller): boolean {
  return caller.platform_admin;
}

// The tenants whose queues below the top level the caller may change: a
// platform admin changes everything in the editor, so none here.
export function queueEditorTenants(caller: Caller): string[] {
  if (caller.platform_admin) return [];
  return Object.keys(caller.tenants)
    .filter((t) => caller.tenants[t] === 'tenant-admin')
    .sort();
}

// The queues a tenant-admin may change: those below its tenants' top-level
// queues, in the policy's order.
export function editableQueues(caller: Caller, queues: readonly PolicyQueue[]): PolicyQueue[] {
  const tenants = new Set(queueEditorTenants(caller));
  return queues.filter((q) => q.parent !== '' && tenants.has(q.tenant));
}

// Newest first, as people look for the latest change.
export function newestFirst(versions: readonly PolicyVersionInfo[]): PolicyVersionInfo[] {
  return [...versions].sort((a, b) => b.version - a.version);
}

// ---- the diff page's URL -------------------------------------------------

export interface DiffPair {
  from: number | null; // null: the server's default (the version before `to`)
  to: number | null; // null: the active version
}

const versionOf = (s: string | null): number | null => {
  if (s === null || !/^\d+$/.test(s.trim())) return null;
  const n = Number(s.trim());
  return Number.isSafeInteger(n) && n >= 0 ? n : null;
};

// /ui/policy/diff?from=2&to=5 -> {from: 2, to: 5}; a value that is not a
// version number is dropped (the server's default then applies).
export function parseDiffSearch(search: string): DiffPair {
  const p = new URLSearchParams(search);
  return { from: versionOf(p.get('from')), to: versionOf(p.get('to')) };
}

export function diffHref(pair: DiffPair): string {
  const p = new URLSearchParams();
  if (pair.from !== null) p.set('from', String(pair.from));
  if (pair.to !== null) p.set('to', String(pair.to));
  const s = p.toString();
  return `/ui/policy/diff${s ? `?${s}` : ''}`;
}

// ---- a unified diff as rows ----------------------------------------------

export type DiffKind = 'file' | 'hunk' | 'add' | 'del' | 'ctx';
export interface DiffRow {
  kind: DiffKind;
  text: string; // the line without its +, - or space
  old: number | null; // its line in the older version
  new: number | null; // its line in the newer one
}

// The rows of a unified diff ("--- a", "+++ b", "@@ -l,n +l,n @@" hunks),
// each line numbered in the version(s) it belongs to.
export function diffRows(diff: string): DiffRow[] {
  const rows: DiffRow[] = [];
  let oldNo = 0;
  let newNo = 0;
  const lines = diff.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  for (const line of lines) {
    const hunk = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (hunk) {
      oldNo = Number(hunk[1]);
      newNo = Number(hunk[2]);
      rows.push({ kind: 'hunk', text: line, old: null, new: null });
    } else if (line.startsWith('--- ') || line.startsWith('+++ ')) {
      rows.push({ kind: 'file', text: line, old: null, new: null });
    } else if (line.startsWith('+')) {
      rows.push({ kind: 'add', text: line.slice(1), old: null, new: newNo++ });
    } else if (line.startsWith('-')) {
      rows.push({ kind: 'del', text: line.slice(1), old: oldNo++, new: null });
    } else {
      rows.push({ kind: 'ctx', text: line.slice(1), old: oldNo++, new: newNo++ });
    }
  }
  return rows;
}

// ---- the change summary --------------------------------------------------

// A quota amount in the unit people write it: GPUs for gpus and
// gpus/MODEL (milli-GPUs in the API), cores for cpu (millicores), GiB for
// gpu_memory and memory (bytes); a weight as it is. null: no limit.
export function quotaAmount(resource: string, field: string, v: number | null): string | null {
  if (v === null) return null;
  if (field === 'weight') return String(v);
  if (resource === 'gpus' || resource.startsWith('gpus/')) return gpus(v / 1000);
  if (resource === 'cpu') return gpus(v / 1000);
  if (resource === 'gpu_memory' || resource === 'memory') return `${gpus(v / 2 ** 30)} GiB`;
  return String(v);
}

// A queue setting's value as text: a list comma-separated, no value as ''.
export function settingValue(v: unknown): string {
  if (v === null || v === undefined) return '';
  if (Array.isArray(v)) return v.map(String).join(', ');
  return String(v);
}

// Whether a summary holds any change at all.
export function anyChange(c: PolicyChanges): boolean {
  return (
    c.queues_added.length +
      c.queues_removed.length +
      c.quota_changes.length +
      c.queue_changes.length +
      c.settings_changed.length +
      (c.tenant_changes?.length ?? 0) >
    0
  );
}

// ---- a preview's figures -------------------------------------------------

export const PREVIEW_METRICS = ['jobs', 'mean_wait_s', 'p95_wait_s', 'mean_jct_s', 'gpu_hours', 'cost'] as const;
export type PreviewMetric = (typeof PREVIEW_METRICS)[number];

// A figure as the page prints it: seconds to 0.1 s, GPU-hours to 0.001,
// cost to 0.01, jobs as a count; null (an unpriced cost) as null.
export function figure(metric: PreviewMetric, v: number | null | undefined): string | null {
  if (v === null || v === undefined) return null;
  switch (metric) {
    case 'jobs':
      return String(v);
    case 'gpu_hours':
      return String(Math.round(v * 1000) / 1000);
    case 'cost':
      return v.toFixed(2);
    default:
      return (Math.round(v * 10) / 10).toFixed(1);
  }
}

// A change, signed: "+2.4", "-0.8", "0.0".
export function signed(metric: PreviewMetric, v: number | null | undefined): string | null {
  const f = figure(metric, v);
  if (f === null || v === null || v === undefined) return null;
  return Number(f) > 0 ? `+${f}` : Number(f) < 0 ? f : f.replace(/^-/, '');
}

export interface PreviewCell {
  metric: PreviewMetric;
  current: number | null;
  proposed: number | null;
  change: number | null;
}
export interface PreviewRow {
  tenant: string | null; // null: every tenant together
  cells: PreviewCell[];
}

function cellsOf(e: PreviewEntry): PreviewCell[] {
  return PREVIEW_METRICS.map((metric) => {
    const cur = (e.current as unknown as Record<string, number | null>)[metric] ?? null;
    const pro = (e.proposed as unknown as Record<string, number | null>)[metric] ?? null;
    let change = metric === 'jobs' ? null : (e.change[metric] ?? null);
    if (metric === 'jobs' && cur !== null && pro !== null) change = pro - cur;
    return { metric, current: cur, proposed: pro, change };
  });
}

// One row per tenant, in the answer's order, then the overall row; none
// when no job ran in the window (the answer then carries a `message`).
export function previewRows(p: { overall?: PreviewEntry; tenants?: PreviewEntry[] }): PreviewRow[] {
  const rows: PreviewRow[] = (p.tenants ?? []).map((e) => ({ tenant: e.tenant ?? '', cells: cellsOf(e) }));
  if (p.overall) rows.push({ tenant: null, cells: cellsOf(p.overall) });
  return rows;
}

export type { PreviewFigures };

// ---- where a refusal points ----------------------------------------------

// The segments of a field path: "queues[1].children[0].quota.gpus.guaranteed"
// -> ["queues", 1, "children", 0, "quota", "gpus", "guaranteed"].
export function fieldPath(field: string): (string | number)[] {
  const out: (string | number)[] = [];
  for (const m of field.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) out.push(m[2] !== undefined ? Number(m[2]) : m[1]);
  return out;
}

interface Line {
  text: string;
  indent: number; // leading spaces
  key: number; // where a mapping key on it starts (after any "- ")
  content: boolean; // not blank, not a comment
}

function linesOf(yaml: string): Line[] {
  return yaml.split('\n').map((text) => {
    const indent = text.length - text.trimStart().length;
    let key = indent;
    while (text.startsWith('- ', key) || text.slice(key) === '-') key += 2;
    const rest = text.slice(indent);
    return { text, indent, key, content: rest !== '' && !rest.startsWith('#') };
  });
}

// A node of a block-style document: its lines [start, end) and, for a
// mapping, the column its keys start at (-1: a value on one line).
interface Node {
  start: number;
  end: number;
  column: number;
  line: number; // the line that names it (its key, or its "- ")
}

function childOf(lines: Line[], at: Node, seg: string | number): Node | null {
  const within = lines.slice(at.start, at.end);
  if (at.column < 0) {
    // A flow value ({a: 1} or [x, y]) on one line: it is the answer.
    const line = within[0]?.text ?? '';
    if (typeof seg === 'number' || new RegExp(`[{,]\\s*${escape(seg)}\\s*:`).test(line)) return at;
    return null;
  }
  if (typeof seg === 'number') {
    const first = within.find((l) => l.content);
    if (!first) return null;
    const col = first.indent;
    const items: number[] = [];
    within.forEach((l, i) => {
      if (l.content && l.indent === col && /^-(\s|$)/.test(l.text.slice(col))) items.push(at.start + i);
    });
    if (seg >= items.length) return null;
    return { start: items[seg], end: items[seg + 1] ?? at.end, column: col + 2, line: items[seg] };
  }
  for (let i = at.start; i < at.end; i++) {
    const l = lines[i];
    if (!l.content || l.key !== at.column) continue;
    const m = new RegExp(`^${escape(seg)}\\s*:(\\s|$)`).exec(l.text.slice(l.key));
    if (!m) continue;
    const value = l.text.slice(l.key + m[0].length).replace(/\s+#.*$/, '').trim();
    if (value !== '') return { start: i, end: i + 1, column: -1, line: i };
    // A block below: every line indented past the key, or a sequence at
    // the key's own column.
    let end = i + 1;
    for (; end < at.end; end++) {
      const n = lines[end];
      if (!n.content) continue;
      if (n.indent > l.key) continue;
      if (n.indent === l.key && /^-(\s|$)/.test(n.text.slice(n.indent))) continue;
      break;
    }
    const first = lines.slice(i + 1, end).find((n) => n.content);
    if (!first) return { start: i, end: i + 1, column: -1, line: i };
    return { start: i + 1, end, column: first.key, line: i };
  }
  return null;
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

// The line (1-based) of `yaml` that a refusal's field path names, or the
// line of the deepest part of it found; null when not even its first part
// is there (a field such as `body`). Block-style YAML as people and Berth
// write it; a flow value is found as the line it is on.
export function fieldLine(yaml: string, field: string): number | null {
  const lines = linesOf(yaml);
  let at: Node = { start: 0, end: lines.length, column: 0, line: 0 };
  let found: number | null = null;
  for (const seg of fieldPath(field)) {
    const next = childOf(lines, at, seg);
    if (!next) break;
    found = next.line + 1;
    at = next;
  }
  return found;
}

// The line a refusal names: the field's line in the text sent, else the
// "line N" a YAML parse error's message gives.
export function errorLine(yaml: string, err: { field: string; message: string }): number | null {
  if (err.field) {
    const l = fieldLine(yaml, err.field);
    if (l !== null) return l;
  }
  const m = /\bline (\d+)/.exec(err.message);
  return m ? Number(m[1]) : null;
}

// ---- a tenant-admin's queue change ---------------------------------------

export interface QueueQuotaForm {
  queue: string;
  guaranteed: string; // GPUs as the policy writes them: 4, 0.5, 500m
  borrow_limit: string; // '' for no limit
}

// The form's values for a queue of the policy: its GPU guarantee and
// borrow limit as the policy writes them (GPUs).
export function quotaFormOf(q: PolicyQueue): QueueQuotaForm {
  const g = q.quota.gpus;
  return {
    queue: q.path,
    guaranteed: gpus((g?.guaranteed ?? 0) / 1000),
    borrow_limit: g && g.borrow_limit !== null ? gpus(g.borrow_limit / 1000) : '',
  };
}

const AMOUNT = /^\d+(\.\d+)?m?$/;

export type QuotaEditError = { field: keyof QueueQuotaForm; problem: 'amount' | 'queue' };

// `yaml` (the policy in Berth's normalized form) with the GPU quota of the
// queue at `form.queue` set to the form's guarantee and borrow limit (an
// empty limit: none), its weight and lending limit kept. Only that one line
// changes (or, for a queue with no quota yet, two lines are added below its
// name), so the policy applied differs from the active one in that queue
// alone. An amount that is not a number, or a queue the text lacks, is an
// error naming the form's field; the server checks the amount again.
export function setQueueGpuQuota(yaml: string, form: QueueQuotaForm): string | QuotaEditError {
  const guaranteed = form.guaranteed.trim();
  const borrow = form.borrow_limit.trim();
  if (!AMOUNT.test(guaranteed)) return { field: 'guaranteed', problem: 'amount' };
  if (borrow !== '' && !AMOUNT.test(borrow)) return { field: 'borrow_limit', problem: 'amount' };
  const lines = linesOf(yaml);
  const text = lines.map((l) => l.text);
  let at: Node | null = childOf(lines, { start: 0, end: lines.length, column: 0, line: 0 }, 'queues');
  const names = form.queue.split('/');
  for (let depth = 0; at && depth < names.length; depth++) {
    if (depth > 0) at = childOf(lines, at, 'children');
    if (!at || at.column < 0) return { field: 'queue', problem: 'queue' };
    let item: Node | null = null;
    for (let i = 0; ; i++) {
      const cand = childOf(lines, at, i);
      if (!cand) break;
      const name = childOf(lines, cand, 'name');
      if (name && new RegExp(`:\\s*['"]?${escape(names[depth])}['"]?\\s*$`).test(text[name.start])) {
        item = cand;
        break;
      }
    }
    at = item;
  }
  if (!at) return { field: 'queue', problem: 'queue' };
  const column = at.column;
  const quota = childOf(lines, at, 'quota');
  const gpusAt = quota && quota.column >= 0 ? childOf(lines, quota, 'gpus') : null;
  const entries = new Map<string, string>();
  if (gpusAt) {
    const flow = /:\s*\{(.*)\}\s*$/.exec(text[gpusAt.start]);
    if (flow) {
      for (const part of flow[1].split(',')) {
        const [k, ...v] = part.split(':');
        if (k.trim()) entries.set(k.trim(), v.join(':').trim());
      }
    }
  }
  entries.set('guaranteed', guaranteed);
  if (borrow === '') entries.delete('borrow_limit');
  else entries.set('borrow_limit', borrow);
  const order = ['guaranteed', 'borrow_limit', 'weight', 'lending_limit'];
  const keys = [...order.filter((k) => entries.has(k)), ...[...entries.keys()].filter((k) => !order.includes(k))];
  const map = `{${keys.map((k) => `${k}: ${entries.get(k)}`).join(', ')}}`;
  if (gpusAt) {
    const l = lines[gpusAt.start];
    text[gpusAt.start] = `${' '.repeat(l.key)}gpus: ${map}`;
  } else if (quota && quota.column >= 0) {
    text.splice(quota.start, 0, `${' '.repeat(quota.column)}gpus: ${map}`);
  } else if (quota) {
    return { field: 'queue', problem: 'queue' }; // a flow quota: left to the YAML editor
  } else {
    // Below the queue's first line (its name).
    text.splice(at.start + 1, 0, `${' '.repeat(column)}quota:`, `${' '.repeat(column + 2)}gpus: ${map}`);
  }
  return text.join('\n');
}
