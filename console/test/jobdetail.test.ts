import { describe, expect, it } from 'vitest';
import type { Reason, RunInfo } from '../src/api';
import {
  causeText,
  clockText,
  etaOf,
  etaText,
  gpusText,
  hintSentence,
  inAbout,
  layerLines,
  layerSentence,
  placementGroups,
  runOutcome,
  timelineOrder,
} from '../src/jobdetail';

const run = (replica: number, attempt: number, over: Partial<RunInfo> = {}): RunInfo => ({
  replica,
  attempt,
  run_id: `7.${replica}.${attempt}`,
  node: `n${replica}`,
  gpus: [replica * 2, replica * 2 + 1],
  state: 'Running',
  exit_code: null,
  signal: null,
  stopped_for: '',
  started_at_ms: 1000,
  finished_at_ms: null,
  ...over,
});

describe('placement', () => {
  it("groups every attempt's runs, the newest attempt first, replicas in order", () => {
    const groups = placementGroups({
      runs: [run(1, 0, { state: 'Exited', stopped_for: 'preempted' }), run(0, 0, { state: 'Exited' }), run(1, 1), run(0, 1)],
    });
    expect(groups.map((g) => [g.attempt, g.current, g.runs.map((r) => r.replica)])).toEqual([
      [1, true, [0, 1]],
      [0, false, [0, 1]],
    ]);
  });

  it("falls back to the current attempt's placement, and is empty for a job never placed", () => {
    expect(placementGroups({ placement: [run(0, 2)] }).map((g) => [g.attempt, g.current])).toEqual([[2, true]]);
    expect(placementGroups({})).toEqual([]);
    expect(placementGroups({ runs: [], placement: [] })).toEqual([]);
  });

  it("shows GPU indices as the node numbers them, a slice with its share", () => {
    expect(gpusText({ gpus: [0, 1, 5] })).toBe('0, 1, 5');
    expect(gpusText({ gpus: [3], gpu_share_mgpu: 250 })).toBe('3 (0.25)');
    expect(gpusText({ gpus: [] })).toBe('');
  });

  it('says how a run ended: exit code, signal, what Berth stopped it for, in both languages', () => {
    expect(runOutcome({ exit_code: 3, signal: null, stopped_for: '' }, 'en')).toBe('exit code 3');
    expect(runOutcome({ exit_code: null, signal: 9, stopped_for: 'preempted' }, 'en')).toBe('signal 9, stopped: preempted');
    expect(runOutcome({ exit_code: null, signal: 9, stopped_for: 'preempted' }, 'zh')).toBe('信号 9，已停止：被抢占');
    expect(runOutcome({ exit_code: null, signal: null, stopped_for: 'warp_drive' }, 'en')).toBe('stopped: warp_drive');
    expect(runOutcome({ exit_code: null, signal: null, stopped_for: '' }, 'en')).toBe('');
  });
});

describe('the timeline', () => {
  it('puts events oldest first, newest last, keeping the order of equal times', () => {
    const e = (time_ms: number, event: string) => ({ time_ms, event, state: 'Pending', message: '' });
    expect(timelineOrder([e(30, 'c'), e(10, 'a'), e(20, 'b1'), e(20, 'b2')]).map((x) => x.event)).toEqual(['a', 'b1', 'b2', 'c']);
    expect(timelineOrder(undefined)).toEqual([]);
  });
});

describe("why's verified hint", () => {
  it('leads with the hint berthd sends in the words of `berth why`, in both languages', () => {
    expect(hintSentence({ hint: 'it would run now with gpu_model H100-80GB' }, 'en')).toBe(
      'Smallest change, checked by the scheduler: it would run now with gpu_model H100-80GB',
    );
    expect(hintSentence({ hint: '若改用 H100-80GB 型号的 GPU，现在即可运行' }, 'zh')).toBe(
      '最小改动（已由调度器验证）：若改用 H100-80GB 型号的 GPU，现在即可运行',
    );
  });

  it('says nothing without a hint', () => {
    expect(hintSentence({}, 'en')).toBeNull();
    expect(hintSentence({ hint: ' ' }, 'en')).toBeNull();
    expect(hintSentence(null, 'zh')).toBeNull();
  });
});

describe("why's layers", () => {
  const behind: Reason = { code: 'BehindInQueue', message: '', counts: { position: 2, ahead_jobs: 1, ahead_gpus: 16 } };
  const layers = [
    { layer: 'order', code: 'BehindInQueue' },
    {
      layer: 'nodes',
      nodes: 2,
      could_take: 0,
      excluded: [
        { cause: 'node_selector_mismatch', nodes: 2 },
        { cause: 'warp_field', nodes: 1 },
      ],
    },
  ];

  it('ranks the layer holding the job now first, with the numbers of each', () => {
    const lines = layerLines(layers, behind, 'en');
    expect(lines.map((l) => [l.layer, l.now, l.nodes, l.couldTake])).toEqual([
      ['order', true, null, null],
      ['nodes', false, 2, 0],
    ]);
    expect(lines.map((l) => layerSentence(l, 'en'))).toEqual([
      "Queue order: number 2 among its queue's waiting jobs; 1 ahead of it ask for 16 GPUs",
      'Nodes: 0 of 2 could ever take a replica — 2 with labels not matching the node selector, 1: warp_field',
    ]);
    expect(lines[1].causes.map((c) => [c.cause, c.nodes])).toEqual([
      ['node_selector_mismatch', 2],
      ['warp_field', 1],
    ]);
  });

  it('says how many nodes a cause alone would open, in both languages', () => {
    const ranked = [
      { layer: 'order', code: 'BehindInQueue' },
      {
        layer: 'nodes',
        nodes: 5,
        could_take: 0,
        excluded: [
          { cause: 'node_selector_mismatch', nodes: 2, alone: 2 },
          { cause: 'warp_field', nodes: 4, alone: 0 },
        ],
      },
    ];
    const en = layerLines(ranked, behind, 'en');
    expect(en[1].causes.map((c) => [c.cause, c.nodes, c.alone])).toEqual([
      ['node_selector_mismatch', 2, 2],
      ['warp_field', 4, 0],
    ]);
    expect(layerSentence(en[1], 'en')).toBe(
      'Nodes: 0 of 5 could ever take a replica — 2 with labels not matching the node selector (2 would open if only this changed), 4: warp_field',
    );
    expect(layerSentence(layerLines(ranked, behind, 'zh')[1], 'zh')).toBe(
      '节点：5 个节点中有 0 个能够容纳它的副本——2 个标签与节点选择器不匹配（只改这一项即可开放 2 个），4 个：warp_field',
    );
  });

  it('speaks Chinese, with cause names translated and unknown ones raw', () => {
    const lines = layerLines(layers, behind, 'zh');
    expect(lines.map((l) => layerSentence(l, 'zh'))).toEqual([
      '队列顺序：在队列等待的作业中排第 2 位；前面的 1 个作业共需 16 块 GPU',
      '节点：2 个节点中有 0 个能够容纳它的副本——2 个标签与节点选择器不匹配，1 个：warp_field',
    ]);
  });

  it("words a quota's and a budget's numbers, in GPUs and the budget's unit", () => {
    const quota: Reason = {
      code: 'OverQuota',
      message: '',
      counts: { requested_mgpu: 4000, queue_used_mgpu: 6500, queue_guaranteed_mgpu: 4000, queue_borrow_limit_mgpu: 2000 },
    };
    expect(layerSentence(layerLines([{ layer: 'quota', code: 'OverQuota' }], quota, 'en')[0], 'en')).toBe(
      'Quota: it asks for 4 GPUs; its queue uses 6.5, guaranteed 4, borrow limit 2',
    );
    const unlimited = { ...quota, counts: { requested_mgpu: 1000, queue_used_mgpu: 0 } };
    expect(layerLines([{ layer: 'quota' }], unlimited, 'en')[0].text).toBe(
      'it asks for 1 GPUs; its queue uses 0, guaranteed 0, borrow limit none',
    );
    const budget: Reason = { code: 'OverBudget', message: '', detail: '2026-11 GPU-hours', counts: { budget_used_micros: 12_500_000, budget_limit_micros: 10_000_000 } };
    expect(layerLines([{ layer: 'budget', code: 'OverBudget' }], budget, 'en')[0].text).toBe('12.50 of 10.00 GPU-hours used in 2026-11');
    expect(layerLines([{ layer: 'budget' }], { code: 'OverBudget', message: '' }, 'zh')[0].text).toBe('租户已超出本月预算');
  });

  it("lists a NoNodeFits reason's node causes from its counts, the most first, and nothing else of them", () => {
    const reason: Reason = {
      code: 'NoNodeFits',
      message: '',
      counts: { too_few_free_gpus: 1, gpu_model_mismatch: 3, eta_in_ms: 5000, preempt_candidates: 0 },
    };
    const [line] = layerLines([{ layer: 'nodes', code: 'NoNodeFits' }], reason, 'en');
    expect(layerSentence(line, 'en')).toBe('Nodes: no node can take it now — 3 with no GPU of the requested model, 1 with too few free GPUs');
    expect(layerLines([{ layer: 'nodes', code: 'Fragmented' }], { code: 'Fragmented', message: '', counts: { free_gpus: 6, largest_free_on_a_node: 3, needed_gpus: 4 } }, 'en')[0].text).toBe(
      '6 GPUs free in all, at most 3 on one node; it needs 4',
    );
    expect(layerLines([{ layer: 'nodes', code: 'NoNodes' }], { code: 'NoNodes', message: '' }, 'zh')[0].text).toBe('尚未注册任何节点');
  });

  it('shows a layer it does not know by its name and code', () => {
    const [line] = layerLines([{ layer: 'moon_phase', code: 'Waxing' }], { code: 'Waxing', message: '' }, 'en');
    expect(layerSentence(line, 'en')).toBe('moon_phase: Waxing');
    expect(layerLines(undefined, null, 'en')).toEqual([]);
  });

  it('names every node cause the scheduler has in both languages', () => {
    for (const cause of [
      'node_not_ready',
      'node_cordoned',
      'outside_pool',
      'node_selector_mismatch',
      'untolerated_taint',
      'gpu_model_mismatch',
      'gpu_memory_too_small',
      'gpus_unhealthy',
      'too_few_gpus_in_total',
      'topology',
      'inference_headroom',
    ]) {
      expect(causeText(cause, 2, 'en')).not.toContain(cause);
      expect(causeText(cause, 2, 'zh')).toMatch(/^2 个/);
    }
  });
});

describe('the estimated start', () => {
  // 2026-03-10 15:30 UTC.
  const now = Date.parse('2026-03-10T15:30:00Z');

  it('reads the eta keys of a reason, or none', () => {
    expect(etaOf({ eta_ms: now + 1500_000, eta_in_ms: 1500_000, eta_reserved: 1, eta_basis: 1 })).toEqual({
      kind: 'known', at: now + 1500_000, inMs: 1500_000, reserved: true, basis: 'declared', afterJob: null, afterMs: null, overrun: false,
    });
    expect(etaOf({ eta_unknown: 1, eta_blocked_by: 12, eta_blockers: 3 })).toEqual({ kind: 'unknown', why: 'blocked', blockedBy: 12, blockers: 3 });
    expect(etaOf({ eta_unknown: 9 })).toMatchObject({ kind: 'unknown', why: 'other' });
    expect(etaOf({ not_before_ms: now + 60_000, not_before_in_ms: 60_000, blocked_by: 4 })).toEqual({ kind: 'not_before', at: now + 60_000, inMs: 60_000, job: 4 });
    expect(etaOf({ position: 1 })).toBeNull();
    expect(etaOf(undefined)).toBeNull();
  });

  it('says "in about N" in minutes, hours or days', () => {
    expect(inAbout(-5, 'en')).toBe('any moment now');
    expect(inAbout(20_000, 'en')).toBe('in under a minute');
    expect(inAbout(25 * 60_000, 'en')).toBe('in about 25 min');
    expect(inAbout(89 * 60_000, 'en')).toBe('in about 89 min');
    expect(inAbout(150 * 60_000, 'en')).toBe('in about 3 h');
    expect(inAbout(3 * 86_400_000, 'en')).toBe('in about 3 days');
    expect(inAbout(25 * 60_000, 'zh')).toBe('约 25 分钟后');
  });

  it('shows the clock time alone today, with the date on another day', () => {
    expect(clockText(now + 25 * 60_000, now, 'en', 'UTC')).toBe('15:55');
    expect(clockText(Date.parse('2026-03-12T08:05:00Z'), now, 'en', 'UTC')).toBe('12 Mar, 08:05');
    expect(clockText(Date.parse('2026-03-12T08:05:00Z'), now, 'zh', 'UTC')).toBe('3月12日 08:05');
    // The day is the reader's: 23:30 UTC is the next day in Shanghai.
    expect(clockText(Date.parse('2026-03-10T23:30:00Z'), now, 'en', 'Asia/Shanghai')).toBe('11 Mar, 07:30');
  });

  it('words a known start with its basis and the job it waits for, from the reader\'s now', () => {
    const eta = etaOf({ eta_ms: now + 25 * 60_000, eta_in_ms: 30 * 60_000, eta_basis: 2, eta_after_job: 9, eta_after_ms: now + 24 * 60_000, eta_after_overrun: 1 })!;
    expect(etaText(eta, now, 'en', 'UTC')).toEqual({
      kind: 'known',
      when: '15:55 (in about 25 min)',
      basis:
        'run times predicted from past runs; no GPUs reserved, the last job it waits for is job 9, ending around 15:54, that job has run past its predicted run time, so its end is taken as long again as it has run',
      job: 9,
    });
    const reserved = etaOf({ eta_ms: now + 2 * 3_600_000, eta_in_ms: 2 * 3_600_000, eta_reserved: 1 })!;
    expect(etaText(reserved, now, 'zh', 'UTC')).toMatchObject({ when: '17:30（约 2 小时后）', basis: '已为它预留 GPU：填补空隙的作业不会推迟它' });
    expect(etaText(etaOf({ eta_in_ms: 120_000 })!, now, 'en').when).toBe('in about 2 min');
  });

  it('says why a start is unknown, and what a job behind its queue\'s head waits for', () => {
    expect(etaText(etaOf({ eta_unknown: 1, eta_blocked_by: 12, eta_blockers: 1 })!, now, 'en').when).toBe('unknown: job 12 on GPUs it needs has no max runtime');
    expect(etaText(etaOf({ eta_unknown: 1, eta_blocked_by: 12, eta_blockers: 3 })!, now, 'en').when).toBe(
      'unknown: job 12 and 2 more on GPUs it needs have no max runtime',
    );
    expect(etaText(etaOf({ eta_unknown: 4 })!, now, 'zh').when).toBe('无法估计：没有任何节点能容纳它');
    expect(etaText(etaOf({ not_before_ms: now + 3_600_000, not_before_in_ms: 3_600_000, blocked_by: 4 })!, now, 'en', 'UTC')).toEqual({
      kind: 'not_before',
      when: '16:30 (in about 60 min)',
      basis: 'not before job 4, first in its queue, starts',
      job: 4,
    });
  });
});
