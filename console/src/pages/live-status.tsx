// How a view keeps itself current: it refetches on the events of its topics
// (the tab's stream, live.ts) and, only while the stream is not live, polls
// at its old interval; and the line that says which of the two it is doing.

import { useEffect, useRef, useState } from 'preact/hooks';
import { useConsole } from '../app';
import type { Batch, LiveEvent, LiveState, Topic } from '../live';

export interface LiveRefresh {
  topics: readonly Topic[];
  // The interval while the stream is down or not yet up (the view's old polling).
  pollMs: number;
  // An interval while live too, for what no event reports (a GPU's
  // utilization, other tenants' jobs); none by default.
  livePollMs?: number;
  // false: neither events nor polls (a finished job, a page berthd refused).
  active?: boolean;
  // Which events concern the view (default: every event of its topics).
  match?: (e: LiveEvent) => boolean;
  delayMs?: number;
  minIntervalMs?: number;
  // When the view's last fetch started (LiveHub.now), for a view that
  // knows better than the hook's own reckoning below (one whose first
  // fetch waits for the stream, LiveHub.settled).
  fetchedAt?: () => number | null;
}

// The tab's stream state, re-rendering when it changes.
export function useLiveState(): LiveState {
  const { live } = useConsole();
  const [state, setState] = useState<LiveState>(live.state);
  useEffect(() => {
    setState(live.state);
    return live.onState(setState);
  }, [live]);
  return state;
}

// Calls `refetch` with the events' batch, or with null for a poll. The
// latest `refetch` and `match` are used, so they may close over the
// view's current data. `refetch` returns false when it asked for nothing
// (a view that throttles itself).
//
// The hook keeps when the view's last fetch started, for the hub: the
// view's first fetch starts when it mounts (its load effect runs in the
// same commit as this hook's), the later ones when the hook calls
// `refetch`. A fetch the view starts on its own (a reload after a button)
// is not counted: the time kept is then older than the truth, which costs
// at most a needless refetch, never a missed one. So a view that loaded
// after the stream's first hello arrived is not told to load again.
export function useLiveRefresh(spec: LiveRefresh, refetch: (b: Batch | null) => void | boolean): LiveState {
  const { live } = useConsole();
  const state = useLiveState();
  const started = useRef<number | null>(null);
  if (started.current === null) started.current = live.now();
  const view = useRef(refetch);
  view.current = refetch;
  const fn = useRef((b: Batch | null) => {
    const at = live.now();
    if (view.current(b) !== false) started.current = at;
  });
  const match = useRef(spec.match);
  match.current = spec.match;
  const fetchedAt = useRef(spec.fetchedAt);
  fetchedAt.current = spec.fetchedAt;
  const active = spec.active ?? true;
  const topics = spec.topics.join(',');
  const filtered = spec.match !== undefined;

  useEffect(() => {
    if (!active) return;
    return live.subscribe(topics.split(',') as Topic[], (b) => fn.current(b), {
      match: filtered ? (e) => match.current?.(e) ?? true : undefined,
      delayMs: spec.delayMs,
      minIntervalMs: spec.minIntervalMs,
      fetchedAt: () => {
        const own = fetchedAt.current?.() ?? null;
        return own === null ? started.current : Math.max(own, started.current ?? own);
      },
    });
  }, [live, active, topics, filtered, spec.delayMs, spec.minIntervalMs]);

  const every = !active ? 0 : state === 'live' ? (spec.livePollMs ?? 0) : spec.pollMs;
  useEffect(() => {
    if (!every) return;
    const timer = setInterval(() => fn.current(null), every);
    return () => clearInterval(timer);
  }, [every]);
  return state;
}

// "Live", "Reconnecting…", or "Refreshed every N s (live updates
// unavailable)": text, with a mark beside it that is never the only sign.
export function LiveStatus({ state, pollMs }: { state: LiveState; pollMs: number }) {
  const { t } = useConsole();
  const text =
    state === 'live'
      ? t('live.on')
      : state === 'reconnecting'
        ? t('live.reconnecting')
        : t('live.polling', { seconds: pollMs / 1000 });
  return (
    <span id="live-status" class={`live-status live-${state}`} data-live={state} role="status">
      {text}
    </span>
  );
}
