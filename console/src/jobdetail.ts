// The job page's arithmetic and wording, kept out of the page so it can be
// tested alone: where each attempt's replicas ran (placement), the
// timeline in time order, the layers of a waiting job's "why" as short
// lines with their numbers, and its estimated start as a local clock time
// with "in about N" and what the estimate stands on.
//
// Every figure is berthd's (GET /v1/jobs/{id} and its why): the reason's
// `counts` and the layers are shown as sent, only put into words here. The
// message above the list is berthd's own sentence in the chosen language.

import type { Reason, RunInfo, TimelineEvent, WhyLayer } from './api';
import { CATALOGUES, type Key, type Lang, labelOf, translate } from './i18n';

// --- placement ---------------------------------------------------------------

// One attempt of a job: its replicas' runs in replica order. `current` is
// the newest attempt (the one GET /v1/jobs/{id}'s `placement` holds).
export interface AttemptGroup {
  attempt: number;
  current: boolean;
  runs: RunInfo[];
}

// Every attempt's runs (`runs`, else the current attempt's `placement`),
// the newest attempt first.
export function placementGroups(job: { runs?: RunInfo[]; placement?: RunInfo[] }): AttemptGroup[] {
  const runs = job.runs ?? job.placement ?? [];
  const by = new Map<number, RunInfo[]>();
  for (const r of runs) by.set(r.attempt, [...(by.get(r.attempt) ?? []), r]);
  const newest = Math.max(-1, ...by.keys());
  return [...by.entries()]
    .sort((a, b) => b[0] - a[0])
    .map(([attempt, rs]) => ({
      attempt,
      current: attempt === newest,
      runs: [...rs].sort((a, b) => a.replica - b.replica),
    }));
}

// A run's GPUs as the node numbers them ("0, 1"); a slice with its share of
// the card ("3 (0.25)"); '' for none.
export function gpusText(r: Pick<RunInfo, 'gpus' | 'gpu_share_mgpu'>): string {
  const list = r.gpus.join(', ');
  return r.gpu_share_mgpu ? `${list} (${r.gpu_share_mgpu / 1000})` : list;
}

// How a run ended, as catalogue keys: its exit code or signal, what Berth
// stopped it for, or nothing while it runs.
export function runOutcome(r: Pick<RunInfo, 'exit_code' | 'signal' | 'stopped_for'>, lang: Lang): string {
  const parts: string[] = [];
  if (r.exit_code !== null && r.exit_code !== undefined) parts.push(translate(lang, 'run.exit', { code: r.exit_code }));
  if (r.signal !== null && r.signal !== undefined) parts.push(translate(lang, 'run.signal', { signal: r.signal }));
  if (r.stopped_for) parts.push(translate(lang, 'run.stopped', { cause: labelOf(lang, 'stopCause', r.stopped_for) }));
  return parts.join(translate(lang, 'layer.sep'));
}

// --- timeline ------------------------------------------------------------------

// The job's events oldest first, newest last (berthd keeps them so; equal
// times keep their order).
export function timelineOrder(events: readonly TimelineEvent[] | undefined): TimelineEvent[] {
  return [...(events ?? [])].map((e, i) => ({ e, i })).sort((a, b) => a.e.time_ms - b.e.time_ms || a.i - b.i).map((x) => x.e);
}

// --- why: the verified hint -------------------------------------------------------

// The sentence a waiting job's why leads with, as `berth why` does: the
// verified hint berthd sends (`reason.hint`, in the language asked for),
// the one change with which a second scheduling run on the same snapshot
// placed the job, so the smallest change known to let it run. Null
// without one; berthd's message and the layers follow it.
export function hintSentence(reason: { hint?: string } | null | undefined, lang: Lang): string | null {
  const hint = reason?.hint?.trim();
  return hint ? translate(lang, 'job.hint', { hint }) : null;
}

// --- why: the layers -----------------------------------------------------------

// Node causes the catalogue words (model/reason.h); any other is shown raw.
export const NODE_CAUSES = [
  'node_not_ready',
  'node_cordoned',
  'outside_pool',
  'inference_headroom',
  'node_selector_mismatch',
  'gpus_unhealthy',
  'topology',
  'untolerated_taint',
  'no_container_runtime',
  'gpu_model_mismatch',
  'gpu_memory_too_small',
  'too_few_gpus_in_total',
  'too_few_free_gpus',
  'too_little_free_cpu',
  'too_little_free_memory',
  'gpu_not_in_sharing_mode',
  'too_little_room_on_shared_gpus',
  'gpus_held_by_slices',
] as const;

export interface CauseLine {
  cause: string;
  nodes: number;
  // Nodes where it is the only cause: lifting it alone would open them
  // (the node layer's least-change count); absent where berthd gives none.
  alone?: number;
  text: string;
}

// One line of the ranked list: the layer's name, its numbers in words, and
// for a node layer the count and the nodes each cause rules out.
export interface LayerLine {
  layer: string;
  code: string;
  now: boolean;
  label: string;
  text: string;
  nodes: number | null;
  couldTake: number | null;
  causes: CauseLine[];
}

// "{n} labels not matching the node selector"; an unknown cause raw.
export function causeText(cause: string, n: number, lang: Lang): string {
  const key = `cause.${cause}` as Key;
  return key in CATALOGUES[lang] ? translate(lang, key, { n }) : translate(lang, 'cause.other', { n, cause });
}

const gpusOfMgpu = (mgpu: number) => String(Math.round(mgpu) / 1000);
const has = (c: Record<string, number> | undefined, k: string) => c !== undefined && typeof c[k] === 'number';

// What the layer holding the job now says with the reason's numbers.
function nowText(layer: string, reason: Reason | null, lang: Lang): { text: string; causes: CauseLine[] } {
  const c = reason?.counts ?? {};
  const t = (key: Key, vars?: Record<string, string | number>) => translate(lang, key, vars);
  switch (layer) {
    case 'order':
      return {
        text: has(c, 'position')
          ? t('layerText.order', { position: c.position, jobs: c.ahead_jobs ?? 0, gpus: c.ahead_gpus ?? 0 })
          : t('layerText.orderPlain'),
        causes: [],
      };
    case 'quota':
      return {
        text:
          has(c, 'requested_mgpu') && has(c, 'queue_used_mgpu')
            ? t('layerText.quota', {
                requested: gpusOfMgpu(c.requested_mgpu),
                used: gpusOfMgpu(c.queue_used_mgpu),
                guaranteed: gpusOfMgpu(c.queue_guaranteed_mgpu ?? 0),
                limit: has(c, 'queue_borrow_limit_mgpu') ? gpusOfMgpu(c.queue_borrow_limit_mgpu) : t('layerText.noLimit'),
              })
            : t('layerText.quotaPlain'),
        causes: [],
      };
    case 'budget': {
      if (!has(c, 'budget_used_micros') || !has(c, 'budget_limit_micros')) return { text: t('layerText.budgetPlain'), causes: [] };
      const [month, ...unit] = (reason?.detail ?? '').split(' ');
      const money = (micros: number) => (micros / 1e6).toFixed(2);
      return {
        text: t('layerText.budget', { used: money(c.budget_used_micros), limit: money(c.budget_limit_micros), unit: unit.join(' '), month }),
        causes: [],
      };
    }
    case 'not_looked_at_yet':
      return { text: t('layerText.notLooked'), causes: [] };
    case 'nodes': {
      if (reason?.code === 'NoNodes') return { text: t('layerText.noNodes'), causes: [] };
      if (reason?.code === 'Fragmented' && has(c, 'free_gpus')) {
        return {
          text: t('layerText.fragmented', { free: c.free_gpus, largest: c.largest_free_on_a_node ?? 0, needed: c.needed_gpus ?? 0 }),
          causes: [],
        };
      }
      // NoNodeFits: its counts hold, per node cause, the nodes it ruled out
      // (beside other numbers: only the causes are listed).
      const causes = NODE_CAUSES.filter((k) => (c[k] ?? 0) > 0)
        .map((k) => ({ cause: k as string, nodes: c[k] }))
        .sort((a, b) => b.nodes - a.nodes)
        .map((x) => ({ ...x, text: causeText(x.cause, x.nodes, lang) }));
      return { text: t('layerText.nodesNow'), causes };
    }
    default:
      return { text: reason?.code ?? '', causes: [] };
  }
}

// The layers of GET /v1/jobs/{id}/why as lines, in berthd's order (the one
// holding the job now first). A node layer with numbers reads "0 of 2 could
// ever take a replica" with the nodes each cause rules out, in berthd's
// least-change order, each saying how many nodes it alone would open.
export function layerLines(layers: readonly WhyLayer[] | undefined, reason: Reason | null, lang: Lang): LayerLine[] {
  return (layers ?? []).map((l, i) => {
    const label = labelOf(lang, 'layer', l.layer);
    const withNumbers = typeof l.nodes === 'number' && typeof l.could_take === 'number';
    let text: string;
    let causes: CauseLine[];
    if (withNumbers) {
      text = translate(lang, 'layerText.nodes', { ok: l.could_take!, nodes: l.nodes! });
      causes = (l.excluded ?? []).map((x) => ({
        cause: x.cause,
        nodes: x.nodes,
        ...(typeof x.alone === 'number' ? { alone: x.alone } : {}),
        text: causeText(x.cause, x.nodes, lang) + (x.alone ? translate(lang, 'layer.alone', { n: x.alone }) : ''),
      }));
    } else {
      ({ text, causes } = i === 0 ? nowText(l.layer, reason, lang) : { text: l.code ?? '', causes: [] });
    }
    return {
      layer: l.layer,
      code: l.code ?? '',
      now: i === 0,
      label,
      text,
      nodes: withNumbers ? l.nodes! : null,
      couldTake: withNumbers ? l.could_take! : null,
      causes,
    };
  });
}

// A line as the page prints it: "Nodes: 0 of 2 could ever take a replica —
// 2 labels not matching the node selector".
export function layerSentence(line: LayerLine, lang: Lang): string {
  const causes = line.causes.map((c) => c.text).join(translate(lang, 'layer.sep'));
  return translate(lang, 'layer.line', { label: line.label, text: line.text }) + (causes ? translate(lang, 'layer.causes', { causes }) : '');
}

// --- why: the estimated start ---------------------------------------------------

export type Eta =
  | {
      kind: 'known';
      at: number | null;
      inMs: number | null;
      reserved: boolean;
      basis: 'declared' | 'predicted' | 'grace' | null;
      afterJob: number | null;
      afterMs: number | null;
      overrun: boolean;
    }
  | { kind: 'unknown'; why: 'blocked' | 'capacity' | 'quota' | 'infeasible' | 'other'; blockedBy: number | null; blockers: number }
  | { kind: 'not_before'; at: number | null; inMs: number | null; job: number | null };

const BASES = { 1: 'declared', 2: 'predicted', 3: 'grace' } as const;
const UNKNOWN = { 1: 'blocked', 2: 'capacity', 3: 'quota', 4: 'infeasible' } as const;

// The estimated start a reason's counts carry (model/reason.h: eta_ms,
// eta_in_ms, eta_reserved, eta_basis, eta_after_*; eta_unknown with
// eta_blocked_by and eta_blockers; not_before_* behind a waiting head), or
// null when they carry none.
export function etaOf(counts: Record<string, number> | undefined): Eta | null {
  const c = counts ?? {};
  const num = (k: string) => (typeof c[k] === 'number' ? c[k] : null);
  if (num('eta_ms') !== null || num('eta_in_ms') !== null) {
    return {
      kind: 'known',
      at: num('eta_ms'),
      inMs: num('eta_in_ms'),
      reserved: (c.eta_reserved ?? 0) !== 0,
      basis: BASES[c.eta_basis as 1 | 2 | 3] ?? null,
      afterJob: num('eta_after_job'),
      afterMs: num('eta_after_ms'),
      overrun: (c.eta_after_overrun ?? 0) !== 0,
    };
  }
  if (num('eta_unknown') !== null) {
    return {
      kind: 'unknown',
      why: UNKNOWN[c.eta_unknown as 1 | 2 | 3 | 4] ?? 'other',
      blockedBy: num('eta_blocked_by'),
      blockers: c.eta_blockers ?? 0,
    };
  }
  if (num('not_before_ms') !== null || num('not_before_in_ms') !== null) {
    return { kind: 'not_before', at: num('not_before_ms'), inMs: num('not_before_in_ms'), job: num('blocked_by') };
  }
  return null;
}

const MINUTE = 60_000;
const HOUR = 3_600_000;

// "in about 25 min", "in about 3 h", "in about 2 days"; "in under a
// minute"; a time already passed (the estimate was made a cycle ago) is
// "any moment now".
export function inAbout(ms: number, lang: Lang): string {
  if (ms <= 0) return translate(lang, 'eta.in.now');
  if (ms < MINUTE) return translate(lang, 'eta.in.soon');
  if (ms < 90 * MINUTE) return translate(lang, 'eta.in.minutes', { n: Math.max(1, Math.round(ms / MINUTE)) });
  if (ms < 36 * HOUR) return translate(lang, 'eta.in.hours', { n: Math.round(ms / HOUR) });
  return translate(lang, 'eta.in.days', { n: Math.round(ms / (24 * HOUR)) });
}

const locale = (lang: Lang) => (lang === 'zh' ? 'zh-CN' : 'en-GB');

// A clock time in the reader's time zone (or `timeZone`): "14:05" on the
// same day as `now`, else with the date ("3 May, 14:05", "5月3日 14:05").
export function clockText(at: number, now: number, lang: Lang, timeZone?: string): string {
  const day = new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' });
  const time = new Intl.DateTimeFormat(locale(lang), { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(at);
  if (day.format(at) === day.format(now)) return time;
  const date = new Intl.DateTimeFormat(locale(lang), { timeZone, month: 'short', day: 'numeric' }).format(at);
  return translate(lang, 'eta.dateTime', { date, time });
}

export interface EtaText {
  kind: Eta['kind'];
  // The start: "14:05 (in about 25 min)", or why it is unknown.
  when: string;
  // What it stands on; '' for an unknown one.
  basis: string;
  // The job whose start or end it waits for, when it names one.
  job: number | null;
}

// The estimated start in words, times from `now` on the reader's clock.
export function etaText(eta: Eta, now: number, lang: Lang, timeZone?: string): EtaText {
  const t = (key: Key, vars?: Record<string, string | number>) => translate(lang, key, vars);
  const when = (at: number | null, inMs: number | null) => {
    const left = at !== null ? at - now : (inMs ?? 0);
    return at !== null ? t('eta.known', { clock: clockText(at, now, lang, timeZone), in: inAbout(left, lang) }) : inAbout(left, lang);
  };
  if (eta.kind === 'unknown') {
    const why =
      eta.why === 'blocked'
        ? eta.blockers > 1
          ? t('eta.unknown.blockedMore', { job: eta.blockedBy ?? '?', more: eta.blockers - 1 })
          : t('eta.unknown.blocked', { job: eta.blockedBy ?? '?' })
        : t(`eta.unknown.${eta.why}` as Key);
    return { kind: 'unknown', when: t('eta.unknown', { why }), basis: '', job: eta.blockedBy };
  }
  if (eta.kind === 'not_before') {
    return { kind: 'not_before', when: when(eta.at, eta.inMs), basis: t('eta.notBefore', { job: eta.job ?? '?' }), job: eta.job };
  }
  const parts = [
    eta.reserved
      ? t('eta.reserved')
      : eta.basis === 'declared'
        ? t('eta.declared')
        : eta.basis === 'predicted'
          ? t('eta.predicted')
          : eta.basis === 'grace'
            ? t('eta.grace')
            : t('eta.estimate'),
  ];
  if (eta.afterJob !== null) {
    parts.push(
      eta.afterMs !== null
        ? t('eta.afterJob', { job: eta.afterJob, clock: clockText(eta.afterMs, now, lang, timeZone) })
        : t('eta.afterJobNoTime', { job: eta.afterJob }),
    );
    if (eta.overrun) parts.push(t('eta.overrun'));
  }
  return { kind: 'known', when: when(eta.at, eta.inMs), basis: parts.join(t('layer.sep')), job: eta.afterJob };
}
