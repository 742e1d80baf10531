import { describe, expect, it } from 'vitest';
import type { FleetGpu, FleetNode } from '../src/api';
import {
  fleetParams,
  fleetView,
  gpuState,
  holderIds,
  isIdleAllocated,
  jobMovesGpus,
  mapRows,
  models,
  NO_FLEET_FILTERS,
  nodeHref,
  parseFleetFilters,
  summarize,
  utilOf,
} from '../src/fleet';

const node = (name: string, state = 'Ready', extra: Partial<FleetNode> = {}): FleetNode => ({
  name,
  state,
  gpus_total: 8,
  gpus_free: 0,
  models: ['H100-80GB'],
  cordon: null,
  ...extra,
});

const gpu = (n: string, index: number, extra: Partial<FleetGpu> = {}): FleetGpu => ({
  node: n,
  node_state: 'Ready',
  index,
  uuid: `GPU-${n}-${index}`,
  model: 'H100-80GB',
  memory_bytes: 85899345920,
  health: 'healthy',
  health_detail: '',
  cordon: null,
  job: null,
  sharing: null,
  ...extra,
});

const held = (id: number) => ({ id, name: `job${id}`, tenant: 'red', queue: 'red/main', replica: 0, run_id: `${id}.0.1` });
const cordon = (kind: 'cordon' | 'drain') => ({ kind, reason: 'r', by: 'ops', automatic: false, at_ms: 1 });

// a: 8 free. b: 4 busy, 1 unhealthy, 3 free. c: cordoned node (8 GPUs, one
// still running a job). d: NotReady with 8 idle GPUs. e: 4 A100s, 1 shared.
function fleet() {
  const nodes = [node('gpu-10'), node('gpu-2'), node('gpu-3', 'Ready', { cordon: cordon('cordon') }), node('gpu-4', 'NotReady'), node('a100-1')];
  const gpus: FleetGpu[] = [];
  for (let i = 0; i < 8; i++) gpus.push(gpu('gpu-2', i));
  for (let i = 0; i < 8; i++) {
    gpus.push(gpu('gpu-10', i, i < 4 ? { job: held(7) } : i === 4 ? { health: 'unhealthy', health_detail: 'XID 79' } : {}));
  }
  for (let i = 0; i < 8; i++) gpus.push(gpu('gpu-3', i, { cordon: cordon('cordon'), job: i === 0 ? held(9) : null }));
  for (let i = 0; i < 8; i++) gpus.push(gpu('gpu-4', i, { node_state: 'NotReady' }));
  for (let i = 0; i < 4; i++) {
    gpus.push(
      gpu('a100-1', i, {
        model: 'A100-40GB',
        sharing: { used_mgpu: i === 0 ? 500 : 0, used_memory_bytes: 0, free_memory_bytes: 0, holders: i === 0 ? [{ ...held(11), gpu_share_mgpu: 500 }] : [] },
      }),
    );
  }
  return { nodes, gpus };
}

describe("a GPU's state", () => {
  it('puts a fault first, then the holder, then the cordon, then the node', () => {
    expect(gpuState(gpu('n', 0))).toBe('free');
    expect(gpuState(gpu('n', 0, { job: held(1), health: 'unhealthy' }))).toBe('unhealthy');
    expect(gpuState(gpu('n', 0, { job: held(1), cordon: cordon('drain') }))).toBe('busy');
    expect(gpuState(gpu('n', 0, { cordon: cordon('drain') }))).toBe('drained');
    expect(gpuState(gpu('n', 0, { cordon: cordon('cordon'), node_state: 'NotReady' }))).toBe('cordoned');
    expect(gpuState(gpu('n', 0, { node_state: 'NotReady' }))).toBe('offline');
    const slices = { used_mgpu: 1, used_memory_bytes: 0, free_memory_bytes: 0, holders: [held(2)] };
    expect(gpuState(gpu('n', 0, { sharing: slices }))).toBe('shared');
    expect(gpuState(gpu('n', 0, { sharing: { ...slices, holders: [] } }))).toBe('free');
  });
});

describe('the summary and fragmentation', () => {
  it('count every GPU and bucket Ready nodes by what they could start now', () => {
    const { nodes, gpus } = fleet();
    const s = summarize(fleetView(nodes, gpus, NO_FLEET_FILTERS));
    expect(s).toMatchObject({
      gpus: 36,
      free: 8 + 3 + 3, // gpu-2, gpu-10's healthy idle ones, a100-1's idle ones; not gpu-4 (NotReady) nor gpu-3 (cordoned)
      busy: 4 + 1,
      shared: 1,
      unhealthy: 1,
      cordoned: 8,
      drained: 0,
      nodesReady: 4,
      nodesNotReady: 1,
      nodesCordoned: 1,
      largestFree: 8,
    });
    // 8 GPUs on the widest Ready node: 9 rows, 8 down to 0.
    expect(s.byFree.map((b) => b.free)).toEqual([8, 7, 6, 5, 4, 3, 2, 1, 0]);
    const at = (n: number) => s.byFree.find((b) => b.free === n)!.nodes;
    expect([at(8), at(3), at(0), at(1)]).toEqual([1, 2, 1, 0]);
    expect(s.byFree.reduce((sum, b) => sum + b.nodes, 0)).toBe(s.nodesReady);
  });

  it('describe one model when the model filter names it', () => {
    const { nodes, gpus } = fleet();
    const f = { ...NO_FLEET_FILTERS, model: 'A100-40GB' };
    const view = fleetView(nodes, gpus, f);
    expect(view.map((v) => v.node.name)).toEqual(['a100-1']);
    const s = summarize(view);
    expect([s.gpus, s.free, s.shared, s.largestFree]).toEqual([4, 3, 1, 3]);
    expect(s.byFree.map((b) => [b.free, b.nodes])).toEqual([[4, 0], [3, 1], [2, 0], [1, 0], [0, 0]]);
    expect(models(gpus)).toEqual(['A100-40GB', 'H100-80GB']);
  });

  it('is empty for an empty fleet', () => {
    const s = summarize([]);
    expect([s.gpus, s.largestFree, s.byFree]).toEqual([0, 0, [{ free: 0, nodes: 0 }]]);
  });
});

describe('the map', () => {
  it('orders nodes as people count (gpu-2 before gpu-10) and GPUs by index', () => {
    const { nodes, gpus } = fleet();
    const view = fleetView(nodes, [...gpus].reverse(), NO_FLEET_FILTERS);
    expect(view.map((v) => v.node.name)).toEqual(['a100-1', 'gpu-2', 'gpu-3', 'gpu-4', 'gpu-10']);
    expect(view[1].gpus.map((g) => g.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it('shows nodes with a GPU in a chosen state, dimming the other cells', () => {
    const { nodes, gpus } = fleet();
    const f = parseFleetFilters('?state=cordoned');
    const rows = mapRows(fleetView(nodes, gpus, f), f);
    expect(rows.map((r) => r.view.node.name)).toEqual(['gpu-3']);
    // The cordoned GPU that still runs a job answers to "cordoned" too.
    expect(rows[0].match.every(Boolean)).toBe(true);
    const busy = parseFleetFilters('?state=busy,unhealthy');
    const b = mapRows(fleetView(nodes, gpus, busy), busy);
    expect(b.map((r) => r.view.node.name)).toEqual(['gpu-3', 'gpu-10']);
    expect(b[1].match).toEqual([true, true, true, true, true, false, false, false]);
  });

  it('keeps the nodes where a gang of min_free could start', () => {
    const { nodes, gpus } = fleet();
    const f = parseFleetFilters('?min_free=4');
    expect(mapRows(fleetView(nodes, gpus, f), f).map((r) => r.view.node.name)).toEqual(['gpu-2']);
    const g = parseFleetFilters('?node=GPU-1&min_free=0');
    expect(mapRows(fleetView(nodes, gpus, g), g).map((r) => r.view.node.name)).toEqual(['gpu-10']);
  });
});

describe('fleet filters', () => {
  it('round-trip through the URL, empty ones left out', () => {
    const f = { model: 'H100-80GB', state: ['free', 'busy'] as const, node: 'rack a', minFree: 8 };
    const q = fleetParams({ ...f, state: [...f.state] }).toString();
    expect(q).toBe('model=H100-80GB&state=free%2Cbusy&node=rack+a&min_free=8');
    expect(parseFleetFilters('?' + q)).toEqual({ ...f, state: ['free', 'busy'] });
    expect(fleetParams(NO_FLEET_FILTERS).toString()).toBe('');
    expect(parseFleetFilters('')).toEqual(NO_FLEET_FILTERS);
  });

  it('drop what they cannot read instead of refusing the page', () => {
    expect(parseFleetFilters('?state=free,bogus,,free&min_free=-1')).toEqual({ ...NO_FLEET_FILTERS, state: ['free'] });
    expect(parseFleetFilters('?min_free=4.5').minFree).toBeNull();
    expect(parseFleetFilters('?min_free=0').minFree).toBe(0);
  });

  it('link a node by its name, dots and all', () => {
    expect(nodeHref('gpu-a1')).toBe('/ui/fleet/gpu-a1');
    expect(nodeHref('h1.example.com')).toBe('/ui/fleet/h1.example.com');
    expect(nodeHref('a b/c')).toBe('/ui/fleet/a%20b%2Fc');
  });
});

const sample = (util: number | null) => ({
  at_ms: 1,
  util_pct: util,
  mem_util_pct: 10,
  memory_used_bytes: 1,
  memory_total_bytes: 2,
  temperature_c: 40,
  power_w: 300,
});

describe('utilization and idle while allocated', () => {
  it("reads a GPU's latest sample as a whole percent, and nothing from a berthd that sends none", () => {
    expect(utilOf(gpu('n', 0, { telemetry: sample(37.4) }))).toBe(37);
    expect(utilOf(gpu('n', 0, { telemetry: sample(120) }))).toBe(100);
    expect(utilOf(gpu('n', 0, { telemetry: sample(-3) }))).toBe(0);
    expect(utilOf(gpu('n', 0, { telemetry: sample(null) }))).toBeNull();
    expect(utilOf(gpu('n', 0, { telemetry: null }))).toBeNull();
    expect(utilOf(gpu('n', 0))).toBeNull();
    expect(utilOf(gpu('n', 0, { telemetry: { util_pct: 'x' } as never }))).toBeNull();
    expect(isIdleAllocated(gpu('n', 0, { job: held(1), idle_allocated: true }))).toBe(true);
    expect(isIdleAllocated(gpu('n', 0, { job: held(1), idle_allocated: false }))).toBe(false);
    expect(isIdleAllocated(gpu('n', 0, { job: held(1) }))).toBe(false);
  });

  it('counts idle-allocated GPUs per node and in the summary, with the mean utilization of the held GPUs sampled', () => {
    const nodes = [node('a'), node('b')];
    const gpus = [
      gpu('a', 0, { job: held(1), telemetry: sample(90) }),
      gpu('a', 1, { job: held(1), telemetry: sample(2), idle_allocated: true }),
      gpu('a', 2, { job: held(2) }), // held, no sample yet
      gpu('a', 3, { telemetry: sample(50) }), // free: not in the mean
      gpu('b', 0, { job: held(3), telemetry: sample(1), idle_allocated: true }),
    ];
    const view = fleetView(nodes, gpus, NO_FLEET_FILTERS);
    expect(view.map((v) => [v.node.name, v.idle])).toEqual([['a', 1], ['b', 1]]);
    const s = summarize(view);
    expect([s.idle, s.sampled, s.meanUtil]).toEqual([2, 3, 31]); // (90 + 2 + 1) / 3
    // A berthd without telemetry: nothing sampled, no mean, none idle.
    const bare = summarize(fleetView(nodes, gpus.map(({ telemetry: _t, idle_allocated: _i, ...g }) => g), NO_FLEET_FILTERS));
    expect([bare.idle, bare.sampled, bare.meanUtil]).toEqual([0, 0, null]);
  });

  it('filters the map to the nodes with an idle-allocated GPU, dimming the others', () => {
    const nodes = [node('a'), node('b')];
    const gpus = [gpu('a', 0, { job: held(1), idle_allocated: true }), gpu('a', 1, { job: held(1) }), gpu('b', 0, { job: held(2) })];
    const f = parseFleetFilters('?state=idle');
    expect(f.state).toEqual(['idle']);
    expect(fleetParams(f).toString()).toBe('state=idle');
    const rows = mapRows(fleetView(nodes, gpus, f), f);
    expect(rows.map((r) => [r.view.node.name, r.match])).toEqual([['a', [true, false]]]);
    // Idle GPUs still answer to their own state.
    const busy = parseFleetFilters('?state=busy');
    expect(mapRows(fleetView(nodes, gpus, busy), busy).map((r) => r.match)).toEqual([[true, true], [true]]);
  });
});

describe('which job events redraw the map', () => {
  it('lists the jobs holding GPUs, slices included, and no other tenant', () => {
    const slices = { used_mgpu: 500, used_memory_bytes: 0, free_memory_bytes: 0, holders: [held(11), { id: null, name: 'another tenant', tenant: null, queue: null, other_tenant: true }] };
    const gpus = [gpu('a', 0, { job: held(7) }), gpu('a', 1, { sharing: slices }), gpu('a', 2, { job: { id: null, name: 'another tenant', tenant: null, queue: null, other_tenant: true } })];
    expect([...holderIds(gpus)].sort()).toEqual([11, 7]);
  });

  it('redraws for a job that takes or leaves GPUs, not for a submission or a running job that stays running', () => {
    const seen = new Map<number, string>();
    const holders = new Set([7]);
    // Submitted: holds nothing.
    expect(jobMovesGpus({ id: 20, state: 'Pending' }, holders, seen)).toBe(false);
    // Scheduled, then Running: takes GPUs (the map has not seen it yet).
    expect(jobMovesGpus({ id: 20, state: 'Scheduled' }, holders, seen)).toBe(true);
    expect(jobMovesGpus({ id: 20, state: 'Running' }, holders, seen)).toBe(true);
    // A timeline entry while it runs: same state.
    expect(jobMovesGpus({ id: 20, state: 'Running' }, holders, seen)).toBe(false);
    // A holder finishing, or put back in the queue, frees its GPUs.
    expect(jobMovesGpus({ id: 7, state: 'Succeeded' }, holders, seen)).toBe(true);
    expect(jobMovesGpus({ id: 7, state: 'Pending' }, holders, seen)).toBe(true);
    // A waiting job cancelled held nothing.
    expect(jobMovesGpus({ id: 21, state: 'Cancelled' }, holders, seen)).toBe(false);
  });
});
