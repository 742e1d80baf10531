// A job's live log, as the job page shows it: GET /v1/jobs/{id}/logs
// ?follow=true read as it arrives, and read again when the stream ends
// while the job has not finished (a proxy's timeout, berthd restarting).
// No DOM and no fetch here: the page hands in how to open the stream.
//
// berthd sends a followed log from its first byte and keeps the stream
// open while the job runs (or waits to be placed), ending it once the job
// has finished and every byte its agents shipped is sent (api.cc, Logs).
// A new stream starts from the first byte again, so what was already shown
// is skipped by its length in bytes. That holds while the log only grows;
// a log trimmed at its tenant's limit between two streams shows a part
// twice or leaves one out, which is why the page says when it reconnected.

import { ApiError } from './api';

// The most text kept on the page: a job that prints without end does not
// grow the page without end. Older lines go first, whole.
export const MAX_LOG_CHARS = 256 * 1024;

// How long to wait after a stream ended before asking again (a network
// error waits the same): one request per RECONNECT_MS at most.
export const RECONNECT_MS = 2000;

export class LogText {
  text = '';
  // Earlier output was dropped to keep the text under maxChars.
  dropped = false;
  // Bytes of the log taken in, over every stream so far.
  private seen = 0;
  // Bytes of the current stream still to skip: already shown.
  private skip = 0;
  private decoder = new TextDecoder();

  constructor(private readonly maxChars = MAX_LOG_CHARS) {}

  // A new stream starts: it repeats the `seen` bytes first.
  restart(): void {
    this.skip = this.seen;
  }

  // Takes in a piece of the stream; true when the text changed. A UTF-8
  // character split between two pieces is decoded once both are in.
  push(chunk: Uint8Array): boolean {
    let part = chunk;
    if (this.skip > 0) {
      const n = Math.min(this.skip, part.length);
      this.skip -= n;
      part = part.subarray(n);
    }
    if (part.length === 0) return false;
    this.seen += part.length;
    const s = this.decoder.decode(part, { stream: true });
    if (!s) return false;
    this.text += s;
    if (this.text.length > this.maxChars) {
      const from = this.text.length - this.maxChars;
      const nl = this.text.indexOf('\n', from);
      this.text = this.text.slice(nl >= 0 && nl < this.text.length - 1 ? nl + 1 : from);
      this.dropped = true;
    }
    return true;
  }
}

export type FollowState = 'connecting' | 'following' | 'reconnecting' | 'ended';

export interface FollowOptions {
  // Opens the stream; throws an ApiError when refused.
  open: (signal: AbortSignal) => Promise<ReadableStream<Uint8Array>>;
  // Whether the job has finished, as the page last heard; asked when a
  // stream ends, and again RECONNECT_MS later.
  finished: () => boolean;
  onText: (log: LogText) => void;
  onState: (state: FollowState) => void;
  // A stream ended: the job may have finished (the page asks for it now
  // rather than at its next poll).
  onEnded: () => void;
  // The server refused the log (403, 404, 401): no more tries.
  onRefused: (e: ApiError) => void;
  signal: AbortSignal;
  wait?: (ms: number, signal: AbortSignal) => Promise<void>;
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((done) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        done();
      },
      { once: true },
    );
  });
}

// A refusal that asking again will not change: the caller may not read
// the log, or there is no such job. A 5xx, a 429 or a lost connection is
// asked again.
function final(e: unknown): e is ApiError {
  return e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 429;
}

// Follows the log until the job has finished and its stream ended, the
// server refuses it, or `signal` aborts (the page closed).
export async function followLog(o: FollowOptions): Promise<void> {
  const wait = o.wait ?? pause;
  const log = new LogText();
  o.onState('connecting');
  for (let streams = 0; !o.signal.aborted; streams++) {
    if (streams > 0) log.restart();
    try {
      const reader = (await o.open(o.signal)).getReader();
      o.onState('following');
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          if (value && log.push(value)) o.onText(log);
        }
      } finally {
        reader.releaseLock();
      }
    } catch (e) {
      if (o.signal.aborted) return;
      if (final(e)) return o.onRefused(e);
    }
    if (o.signal.aborted) return;
    if (o.finished()) return o.onState('ended');
    o.onEnded();
    await wait(RECONNECT_MS, o.signal);
    if (o.signal.aborted) return;
    if (o.finished()) return o.onState('ended');
    o.onState('reconnecting');
  }
}
