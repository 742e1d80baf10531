// The fleet as the GPU map shows it: each GPU's state worked out from
// GET /v1/gpus, the summary line, "fragmentation at a glance" (Ready nodes
// by how many GPUs each could give a job now), and the map's filters as
// they live in the console's URL. Pure functions over the API's answers, so
// they are tested alone and cost nothing to run again on every poll.
//
// `berth nodes` and `berth gpus` take no filters and GET /v1/nodes and
// /v1/gpus accept no query parameters, so the filters here narrow what the
// page shows of the whole lists the caller got, never what it asks for.
//
// A GPU's utilization and "idle but allocated" come from berthd's latest
// telemetry sample (`telemetry`, `idle_allocated` on each GPU of
// GET /v1/gpus); a berthd without them gives neither, and the map shows
// neither.

import type { FleetGpu, FleetNode } from './api';

// What a GPU's cell shows, most pressing first: a fault, then who holds it,
// then why nothing new may go there, then free. A GPU is in exactly one.
export const GPU_STATES = ['unhealthy', 'busy', 'shared', 'drained', 'cordoned', 'offline', 'free'] as const;
export type GpuState = (typeof GPU_STATES)[number];

// What the state filter offers: every state, and "idle but allocated",
// which is no colour of its own (a held GPU keeps its state's colour and
// gets a hatched mark) but a question an operator asks of the map.
export const GPU_FILTERS = [...GPU_STATES, 'idle'] as const;
export type GpuFilter = (typeof GPU_FILTERS)[number];

// The GPU's latest utilization, 0-100 as a whole percent; null without a
// sample (or from a berthd that sends none).
export function utilOf(g: FleetGpu): number | null {
  const u = g.telemetry?.util_pct;
  if (typeof u !== 'number' || !Number.isFinite(u)) return null;
  return Math.round(Math.min(100, Math.max(0, u)));
}

// Held by a job, yet its latest sample is under berthd's idle threshold.
// berthd decides; a berthd that does not say is read as "not idle".
export function isIdleAllocated(g: FleetGpu): boolean {
  return g.idle_allocated === true;
}

// Whether a run holds the GPU (whole or a slice).
export function isHeld(g: FleetGpu): boolean {
  return g.job !== null || (g.sharing?.holders?.length ?? 0) > 0;
}

// Free as the scheduler sees it: on a Ready node, healthy, held by no run
// (whole or slice) and under no cordon. Stricter than `berth nodes`' FREE,
// which counts a NotReady node's idle GPUs too.
export function isFree(g: FleetGpu): boolean {
  return (
    g.node_state === 'Ready' && g.health === 'healthy' && !g.job && !g.cordon && !(g.sharing?.holders?.length ?? 0)
  );
}

export function gpuState(g: FleetGpu): GpuState {
  if (g.health !== 'healthy') return 'unhealthy';
  if (g.job) return 'busy';
  if (g.sharing?.holders?.length) return 'shared';
  if (g.cordon) return g.cordon.kind === 'drain' ? 'drained' : 'cordoned';
  if (g.node_state !== 'Ready') return 'offline';
  return 'free';
}

// Every state a GPU answers to in the state filter: its own, plus its
// cordon when a holder or a fault hides the cordon from the cell's colour,
// so ?state=cordoned finds a cordoned GPU that still runs a job.
export function gpuFacets(g: FleetGpu): Set<GpuFilter> {
  const s = new Set<GpuFilter>([gpuState(g)]);
  if (isIdleAllocated(g)) s.add('idle');
  if (g.cordon) s.add(g.cordon.kind === 'drain' ? 'drained' : 'cordoned');
  if (g.job) s.add('busy');
  if (g.sharing?.holders?.length) s.add('shared');
  if (g.node_state !== 'Ready') s.add('offline');
  return s;
}

export interface FleetFilters {
  model: string; // exact model name; '' is any
  state: GpuFilter[]; // show nodes with a GPU in any of these; [] is any
  node: string; // part of the node's name, any case; '' is any
  minFree: number | null; // only nodes with at least this many free GPUs
}

export const NO_FLEET_FILTERS: FleetFilters = { model: '', state: [], node: '', minFree: null };

const STATE_SET = new Set<string>(GPU_FILTERS);

// The filters of a console URL's query (/ui/fleet?model=H100-80GB&state=free,busy&node=a&min_free=8).
// Unknown states and a min_free that is no whole number are dropped, not
// refused: a hand-edited link still shows the fleet.
export function parseFleetFilters(search: string): FleetFilters {
  const p = new URLSearchParams(search);
  const state = (p.get('state') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s): s is GpuFilter => STATE_SET.has(s));
  const raw = (p.get('min_free') ?? '').trim();
  const n = /^\d{1,4}$/.test(raw) ? Number(raw) : null;
  return {
    model: (p.get('model') ?? '').trim(),
    state: [...new Set(state)],
    node: (p.get('node') ?? '').trim(),
    minFree: n,
  };
}

export function fleetParams(f: FleetFilters): URLSearchParams {
  const p = new URLSearchParams();
  if (f.model.trim()) p.set('model', f.model.trim());
  const states = f.state.filter((s) => STATE_SET.has(s));
  if (states.length) p.set('state', states.join(','));
  if (f.node.trim()) p.set('node', f.node.trim());
  if (f.minFree !== null && Number.isInteger(f.minFree) && f.minFree >= 0) p.set('min_free', String(f.minFree));
  return p;
}

export interface NodeView {
  node: FleetNode;
  gpus: FleetGpu[]; // by index, the model filter applied
  free: number; // GPUs a job could get here now (0 on a NotReady node)
  idle: number; // GPUs held but idle (isIdleAllocated)
}

export interface FleetSummary {
  gpus: number;
  free: number;
  busy: number;
  shared: number;
  unhealthy: number;
  cordoned: number; // under a cordon or a drain, whatever else they are
  drained: number; // of those, under a drain
  idle: number; // held, and idle by their latest sample
  sampled: number; // held GPUs with a utilization sample...
  meanUtil: number | null; // ...and their mean utilization, a whole percent (null: none sampled)
  nodesReady: number;
  nodesNotReady: number;
  nodesCordoned: number;
  // Ready nodes by how many GPUs each has free now, most first, from the
  // largest node's GPU count down to 0 (counts with no node included), so
  // "can an 8-GPU gang start on one node" is the first row.
  byFree: { free: number; nodes: number }[];
  largestFree: number; // the most free GPUs on one Ready node
}

const collator = new Intl.Collator('en', { numeric: true });

// The nodes and their GPUs, grouped and ordered (gpu-2 before gpu-10),
// narrowed by the model and node-name filters. The state and min_free
// filters only choose which of these the map shows (see mapRows), so the
// summary and fragmentation still describe every GPU of that model.
export function fleetView(nodes: FleetNode[], gpus: FleetGpu[], f: FleetFilters): NodeView[] {
  const byNode = new Map<string, FleetGpu[]>();
  for (const g of gpus) {
    let list = byNode.get(g.node);
    if (!list) byNode.set(g.node, (list = []));
    list.push(g);
  }
  const part = f.node.toLowerCase();
  const out: NodeView[] = [];
  for (const node of nodes) {
    if (part && !node.name.toLowerCase().includes(part)) continue;
    let list = byNode.get(node.name) ?? [];
    if (f.model) {
      list = list.filter((g) => g.model === f.model);
      if (!list.length) continue;
    }
    list.sort((a, b) => a.index - b.index);
    let free = 0;
    let idle = 0;
    for (const g of list) {
      if (isFree(g)) free++;
      if (isIdleAllocated(g)) idle++;
    }
    out.push({ node, gpus: list, free, idle });
  }
  out.sort((a, b) => collator.compare(a.node.name, b.node.name));
  return out;
}

export function summarize(view: NodeView[]): FleetSummary {
  const s: FleetSummary = {
    gpus: 0, free: 0, busy: 0, shared: 0, unhealthy: 0, cordoned: 0, drained: 0, idle: 0, sampled: 0, meanUtil: null,
    nodesReady: 0, nodesNotReady: 0, nodesCordoned: 0, byFree: [], largestFree: 0,
  };
  const counts = new Map<number, number>();
  let widest = 0;
  let utilSum = 0;
  for (const v of view) {
    if (v.node.state === 'Ready') {
      s.nodesReady++;
      counts.set(v.free, (counts.get(v.free) ?? 0) + 1);
      s.largestFree = Math.max(s.largestFree, v.free);
      widest = Math.max(widest, v.gpus.length);
    } else {
      s.nodesNotReady++;
    }
    if (v.node.cordon) s.nodesCordoned++;
    for (const g of v.gpus) {
      s.gpus++;
      if (isFree(g)) s.free++;
      if (g.job) s.busy++;
      if (g.sharing?.holders?.length) s.shared++;
      if (g.health !== 'healthy') s.unhealthy++;
      if (g.cordon) {
        s.cordoned++;
        if (g.cordon.kind === 'drain') s.drained++;
      }
      if (isIdleAllocated(g)) s.idle++;
      const u = isHeld(g) ? utilOf(g) : null;
      if (u !== null) {
        s.sampled++;
        utilSum += u;
      }
    }
  }
  if (s.sampled) s.meanUtil = Math.round(utilSum / s.sampled);
  for (let n = widest; n >= 0; n--) s.byFree.push({ free: n, nodes: counts.get(n) ?? 0 });
  return s;
}

// The rows the map shows: the nodes with at least `minFree` free GPUs and,
// with a state filter, a GPU in one of those states; `match` says which
// cells the state filter picks (the others are shown dimmed, so a node keeps
// its shape).
export function mapRows(view: NodeView[], f: FleetFilters): { view: NodeView; match: boolean[] }[] {
  const want = new Set(f.state);
  const rows: { view: NodeView; match: boolean[] }[] = [];
  for (const v of view) {
    if (f.minFree !== null && v.free < f.minFree) continue;
    if (!want.size) {
      rows.push({ view: v, match: v.gpus.map(() => true) });
      continue;
    }
    const match = v.gpus.map((g) => {
      for (const s of gpuFacets(g)) if (want.has(s)) return true;
      return false;
    });
    if (match.some(Boolean)) rows.push({ view: v, match });
  }
  return rows;
}

// The ids of the jobs the map shows holding GPUs (whole or slices).
export function holderIds(gpus: readonly FleetGpu[]): Set<number> {
  const ids = new Set<number>();
  for (const g of gpus) {
    if (g.job?.id != null) ids.add(g.job.id);
    for (const h of g.sharing?.holders ?? []) if (h.id != null) ids.add(h.id);
  }
  return ids;
}

// Whether a job event may change which GPUs are held: the job's state moved
// (from the one last seen, remembered in `seen`) and it holds GPUs on the
// map or is now in a state that holds them. A submission (Pending, holding
// nothing) or a timeline entry of a running job (state unchanged) does not
// redraw a map of 10,000 GPUs.
export function jobMovesGpus(
  e: { id: number; state: string },
  holders: ReadonlySet<number>,
  seen: Map<number, string>,
): boolean {
  const before = seen.get(e.id);
  if (seen.size >= 10000 && before === undefined) seen.clear();
  seen.set(e.id, e.state);
  if (before === e.state) return false;
  return holders.has(e.id) || e.state === 'Scheduled' || e.state === 'Running';
}

// Every model in the fleet, for the model filter's choices.
export function models(gpus: FleetGpu[]): string[] {
  return [...new Set(gpus.map((g) => g.model))].sort(collator.compare);
}

// The console URL of a node (a dotted name too: berthd serves the page
// for any /ui/ path but a built asset's).
export function nodeHref(name: string): string {
  return `/ui/fleet/${encodeURIComponent(name)}`;
}
