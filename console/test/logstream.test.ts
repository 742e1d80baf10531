import { describe, expect, it } from 'vitest';
import { ApiError } from '../src/api';
import { type FollowState, followLog, LogText, RECONNECT_MS } from '../src/logstream';

const bytes = (s: string) => new TextEncoder().encode(s);

// A stream that sends `parts` and then ends (or fails with `error`).
function stream(parts: string[], error?: Error): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (const p of parts) c.enqueue(bytes(p));
      if (error) c.error(error);
      else c.close();
    },
  });
}

describe('the log text', () => {
  it('appends what arrives, a character split between pieces included', () => {
    const log = new LogText();
    const all = bytes('hello\n训练开始\n');
    expect(log.push(all.subarray(0, 8))).toBe(true); // "hello\n" and 2 of the 3 bytes of 训
    expect(log.text).toBe('hello\n');
    log.push(all.subarray(8));
    expect(log.text).toBe('hello\n训练开始\n');
    expect(log.dropped).toBe(false);
  });

  it('skips, on a new stream, the bytes it already showed: the server starts again from the first byte', () => {
    const log = new LogText();
    log.push(bytes('one\ntw'));
    log.restart();
    expect(log.push(bytes('one\n'))).toBe(false);
    log.push(bytes('two\nthree\n'));
    expect(log.text).toBe('one\ntwo\nthree\n');
    // A second restart before the first caught up skips from the start again.
    log.restart();
    log.push(bytes('one\ntwo\n'));
    log.restart();
    log.push(bytes('one\ntwo\nthree\nfour\n'));
    expect(log.text).toBe('one\ntwo\nthree\nfour\n');
  });

  it('keeps the newest lines, whole, under its limit, and says it dropped some', () => {
    const log = new LogText(12);
    log.push(bytes('line1\nline2\nline3\n'));
    expect(log.text).toBe('line3\n');
    expect(log.dropped).toBe(true);
    const long = new LogText(4);
    long.push(bytes('abcdefgh'));
    expect(long.text).toBe('efgh');
  });
});

interface Run {
  opened: number;
  states: FollowState[];
  text: string;
  ended: number;
  refused: ApiError | null;
}

// followLog over `answers`, one per stream opened; waits are instant and
// counted. The job is finished once `finished(run)` says so.
async function follow(answers: (() => ReadableStream<Uint8Array>)[], finished: (run: Run) => boolean) {
  const run: Run = { opened: 0, states: [], text: '', ended: 0, refused: null };
  const waits: number[] = [];
  await followLog({
    open: async () => {
      const a = answers[run.opened++];
      if (!a) throw new Error('asked once too often');
      return a();
    },
    finished: () => finished(run),
    onText: (log) => {
      run.text = log.text;
    },
    onState: (s) => run.states.push(s),
    onEnded: () => run.ended++,
    onRefused: (e) => {
      run.refused = e;
    },
    signal: new AbortController().signal,
    wait: async (ms) => {
      waits.push(ms);
    },
  });
  return { run, waits };
}

describe('following a log', () => {
  it('reads until the stream ends, and stops at once for a job known to have finished', async () => {
    const { run, waits } = await follow([() => stream(['hello\n', 'done\n'])], (r) => r.opened >= 1);
    expect(run.text).toBe('hello\ndone\n');
    expect(run.opened).toBe(1);
    expect(run.states).toEqual(['connecting', 'following', 'ended']);
    expect(run.ended).toBe(0);
    expect(waits).toEqual([]);
  });

  it('has the page ask for the job when the stream ends, and stops if it finished meanwhile', async () => {
    const { run, waits } = await follow([() => stream(['done\n'])], (r) => r.ended >= 1);
    expect(run.opened).toBe(1);
    expect(run.ended).toBe(1);
    expect(run.states).toEqual(['connecting', 'following', 'ended']);
    expect(waits).toEqual([RECONNECT_MS]);
  });

  it('asks again, after a pause, when the stream ends while the job runs, without repeating a line', async () => {
    const { run, waits } = await follow(
      [() => stream(['epoch 1\n']), () => stream(['epoch 1\n', 'epoch 2\n']), () => stream(['epoch 1\nepoch 2\nepoch 3\n'])],
      (r) => r.opened >= 3,
    );
    expect(run.opened).toBe(3);
    expect(run.text).toBe('epoch 1\nepoch 2\nepoch 3\n');
    expect(run.states).toEqual(['connecting', 'following', 'reconnecting', 'following', 'reconnecting', 'following', 'ended']);
    expect(waits).toEqual([RECONNECT_MS, RECONNECT_MS]);
  });

  it('asks again after a broken connection', async () => {
    const { run } = await follow([() => stream(['a\n'], new TypeError('network error')), () => stream(['a\nb\n'])], (r) => r.opened >= 2);
    expect(run.text).toBe('a\nb\n');
    expect(run.opened).toBe(2);
  });

  it("stops at the server's refusal and hands it over", async () => {
    const refused = new ApiError(403, 'viewer may not read the logs of job 4');
    const { run } = await follow(
      [
        () => {
          throw refused;
        },
      ],
      () => false,
    );
    expect(run.refused).toBe(refused);
    expect(run.states).toEqual(['connecting']);
    expect(run.opened).toBe(1);
  });

  it('asks again after a 503', async () => {
    const { run } = await follow(
      [
        () => {
          throw new ApiError(503, 'not the leader');
        },
        () => stream(['x\n']),
      ],
      (r) => r.opened >= 2,
    );
    expect(run.refused).toBeNull();
    expect(run.text).toBe('x\n');
  });

  it('stops when the page closes: an aborted fetch fails its body', async () => {
    const abort = new AbortController();
    let opened = 0;
    const states: FollowState[] = [];
    let text = '';
    await followLog({
      open: async (signal) =>
        new ReadableStream<Uint8Array>({
          start(c) {
            opened++;
            c.enqueue(bytes('running\n'));
            signal.addEventListener('abort', () => c.error(new DOMException('aborted', 'AbortError')));
            setTimeout(() => abort.abort(), 5);
          },
        }),
      finished: () => false,
      onText: (log) => {
        text = log.text;
      },
      onState: (s) => states.push(s),
      onEnded: () => undefined,
      onRefused: () => undefined,
      signal: abort.signal,
    });
    expect(opened).toBe(1);
    expect(text).toBe('running\n');
    expect(states).toEqual(['connecting', 'following']);
  });
});
