// The job page's live log: the job's output in a scrolling <pre>, appended
// as the bytes arrive (logstream.ts), following the end while the reader
// is at the end. The stream is aborted when the page closes or shows
// another job. A caller the server refuses the log to reads its message.

import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../api';
import { useConsole } from '../app';
import { type FollowState, followLog } from '../logstream';

export function LiveLog({ id, finished, onEnded }: { id: number; finished: () => boolean; onEnded: () => void }) {
  const ctx = useConsole();
  const { t, api } = ctx;
  const [text, setText] = useState('');
  const [dropped, setDropped] = useState(false);
  const [state, setState] = useState<FollowState>('connecting');
  const [refused, setRefused] = useState<ApiError | null>(null);
  const pre = useRef<HTMLPreElement>(null);
  // Whether the reader is at the end: new output then scrolls into view;
  // one who scrolled up to read stays where they are.
  const atEnd = useRef(true);
  // Read when the stream asks, so the latest props answer.
  const finishedRef = useRef(finished);
  finishedRef.current = finished;
  const endedRef = useRef(onEnded);
  endedRef.current = onEnded;

  useEffect(() => {
    const abort = new AbortController();
    setText('');
    setDropped(false);
    setRefused(null);
    void followLog({
      open: (signal) => api.followLogs(id, signal),
      finished: () => finishedRef.current(),
      onText: (log) => {
        const el = pre.current;
        atEnd.current = !el || el.scrollTop + el.clientHeight >= el.scrollHeight - 8;
        setText(log.text);
        setDropped(log.dropped);
      },
      onState: setState,
      onEnded: () => endedRef.current(),
      onRefused: (e) => {
        if (e.status === 401) ctx.sessionEnded();
        setRefused(e);
      },
      signal: abort.signal,
    });
    return () => abort.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [id]);

  useEffect(() => {
    const el = pre.current;
    if (el && atEnd.current) el.scrollTop = el.scrollHeight;
  }, [text]);

  const status = refused
    ? ''
    : state === 'ended'
      ? t('log.ended')
      : state === 'reconnecting'
        ? t('log.reconnecting')
        : state === 'following'
          ? t('log.following')
          : t('log.connecting');
  return (
    <>
      <h2 id="log-h">{t('log.title')}</h2>
      {refused ? (
        <p id="log-refused" class="error" role="alert">
          {t('log.refused', { message: refused.message })}
        </p>
      ) : (
        <>
          <p id="log-status" role="status" data-state={state}>
            {status}
            {dropped ? ` ${t('log.dropped')}` : ''}
          </p>
          {text ? (
            <pre id="job-log" class="log" ref={pre} tabIndex={0} aria-labelledby="log-h">
              {text}
            </pre>
          ) : (
            <p id="log-empty">{state === 'ended' ? t('log.none') : t('log.noneYet')}</p>
          )}
        </>
      )}
    </>
  );
}
