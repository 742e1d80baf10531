// One job: its summary, why it is in its state (the server's reason in the
// chosen language, GET /v1/jobs/{id}/why?lang=, led by its verified hint
// when it has one, with the layers holding a waiting job and its estimated
// start), why it failed, where each attempt's
// replicas ran, its GPU utilization, its timeline, its output as it is
// written (LiveLog), and Cancel for a caller whose role may cancel it
// (job-detail.tsx has the parts below the summary).
//
// The job is asked for again when an event names it (a burst is one
// request), or every POLL_MS while the event stream is down, until it has
// finished; while it waits also every PENDING_LIVE_POLL_MS, since berthd
// sends no event when a pending job's reason or estimated start moves; its why only when the job's state or reason moved (and on a
// change of language). When the log's stream ends the job is asked for at
// once: that is usually the job finishing. An answer overtaken by a newer
// request is dropped.

import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, canCancel, isFinished, jobShape, type JobSummary, type Why, whyMayHaveChanged } from '../api';
import { guard, Link, useConsole } from '../app';
import { stateLabel } from '../i18n';
import { hintSentence } from '../jobdetail';
import { FailureView, JobCost, Placement, Timeline, Utilization, WhyLayers } from './job-detail';
import { LiveLog } from './live-log';
import { LiveStatus, useLiveRefresh } from './live-status';

export const POLL_MS = 3000;
export const PENDING_LIVE_POLL_MS = 15000;

export function JobPage({ id }: { id: number }) {
  const ctx = useConsole();
  const { t, lang, api, caller } = ctx;
  const [job, setJob] = useState<JobSummary | null>(null);
  const [why, setWhy] = useState<Why | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [notice, setNotice] = useState('');
  const [tick, setTick] = useState(0);
  // The job as last read, for the live log's question "has it finished?".
  const jobRef = useRef<JobSummary | null>(null);
  const refreshRef = useRef<() => void>(() => undefined);

  useEffect(() => {
    let alive = true;
    let seq = 0;
    let last: JobSummary | null = null;
    const load = async () => {
      const mine = ++seq;
      const j = await guard(ctx, () => api.job(id));
      let w: Why | ApiError | null = null;
      if (alive && mine === seq && !(j instanceof ApiError) && whyMayHaveChanged(last, j)) {
        w = await guard(ctx, () => api.why(id, lang));
      }
      if (!alive || mine !== seq) return;
      const failed = j instanceof ApiError ? j : w instanceof ApiError ? w : null;
      if (failed) return setError(failed);
      const fresh = j as JobSummary;
      setError(null);
      last = fresh;
      jobRef.current = fresh;
      setJob(fresh);
      if (w) setWhy(w as Why);
    };
    refreshRef.current = () => void load();
    void load();
    return () => {
      alive = false;
      refreshRef.current = () => undefined;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [id, lang, tick]);

  // Nothing about a finished job changes, and a job that is not there
  // will not come back: neither is asked for again.
  const done = (job !== null && job.id === id && isFinished(job.state)) || error?.status === 404;
  const live = useLiveRefresh(
    {
      topics: ['job'],
      pollMs: POLL_MS,
      livePollMs: job?.id === id && job.state === 'Pending' ? PENDING_LIVE_POLL_MS : undefined,
      active: !done,
      delayMs: 250,
      match: (e) => e.topic === 'job' && e.data.id === id,
    },
    () => refreshRef.current(),
  );

  if (error && error.status === 404) {
    return (
      <section>
        <h1>{t('job.title', { id, name: '' })}</h1>
        <p role="alert">{t('job.notFound', { id })}</p>
        <Link href="/ui/jobs">{t('job.back')}</Link>
      </section>
    );
  }
  if (!job) {
    return error ? (
      <p class="error" role="alert">
        {t('common.error', { message: error.message })}
      </p>
    ) : (
      <p role="status">{t('common.loading')}</p>
    );
  }

  const when = (ms: number | null) =>
    ms ? new Date(ms).toLocaleString(lang === 'zh' ? 'zh-CN' : 'en-GB') : t('job.notStarted');
  const shape = jobShape(job);
  // The verified hint leads the why, before berthd's sentence and the layers.
  const hint = hintSentence(why?.reason, lang);
  const cancellable = canCancel(caller, job.tenant) && !isFinished(job.state) && !job.cancel_requested;

  const cancel = async () => {
    setConfirming(false);
    const r = await guard(ctx, () => api.cancel(id));
    setNotice(r instanceof ApiError ? t('job.cancelFailed', { message: r.message }) : t('job.cancelRequested'));
    setTick((n) => n + 1);
  };

  return (
    <section aria-labelledby="job-title">
      <p>
        <Link href="/ui/jobs">{t('job.back')}</Link>
      </p>
      <h1 id="job-title">{t('job.title', { id: job.id, name: job.name })}</h1>
      {!isFinished(job.state) && (
        <p class="live-line">
          <LiveStatus state={live} pollMs={POLL_MS} />
        </p>
      )}
      <h2>{t('job.summary')}</h2>
      <dl class="summary">
        <dt>{t('col.state')}</dt>
        <dd id="job-state" class={`state state-${job.state}`}>
          {stateLabel(lang, job.state)}
        </dd>
        <dt>{t('col.tenant')}</dt>
        <dd>{job.tenant}</dd>
        <dt>{t('col.queue')}</dt>
        <dd>{job.queue}</dd>
        <dt>{t('col.user')}</dt>
        <dd>{job.submitted_by}</dd>
        <dt>{t('col.gpus')}</dt>
        <dd id="job-gpus">{shape.gpus}</dd>
        <dt>{t('job.replicas')}</dt>
        <dd>{shape.replicas}</dd>
        <dt>{t('job.priority')}</dt>
        <dd>{shape.priority}</dd>
        <dt>{t('col.submitted')}</dt>
        <dd>{when(job.submitted_at_ms)}</dd>
        <dt>{t('job.started')}</dt>
        <dd>{when(job.started_at_ms)}</dd>
        <dt>{t('job.finished')}</dt>
        <dd>{when(job.finished_at_ms)}</dd>
      </dl>
      <h2>{t('job.why')}</h2>
      {why?.reason ? (
        <div class="why">
          {hint && (
            <p id="why-hint" class="why-hint" data-hint={why.reason.hint} lang={why.lang === 'zh' ? 'zh-CN' : 'en'}>
              {hint}
            </p>
          )}
          <p id="why-message" lang={why.lang === 'zh' ? 'zh-CN' : 'en'}>
            {why.reason.message}
          </p>
          <WhyLayers why={why} />
          <p>
            {t('job.reasonCode')}: <code id="why-code">{why.reason.code}</code>
          </p>
        </div>
      ) : (
        <p>{t('common.none')}</p>
      )}
      <h3>{t('job.timeline')}</h3>
      {why && why.timeline.length ? (
        <ol class="timeline">
          {why.timeline.map((e) => (
            <li>
              <time dateTime={new Date(e.time_ms).toISOString()}>{when(e.time_ms)}</time> <strong>{e.event}</strong>{' '}
              <span lang="en">{e.message}</span>
            </li>
          ))}
        </ol>
      ) : (
        <p>{t('job.noEvents')}</p>
      )}
      {why?.failure && (job.state === 'Failed' || why.reason?.code === 'Retrying') && (
        <FailureView failure={why.failure} whyLang={why.lang} />
      )}
      {notice && <p role="status">{notice}</p>}
      {cancellable &&
        (confirming ? (
          <div class="confirm" role="group" aria-labelledby="cancel-question">
            <p id="cancel-question">{t('job.cancelConfirm', { id: job.id })}</p>
            <button type="button" class="danger" id="cancel-yes" onClick={cancel}>
              {t('job.cancelYes')}
            </button>{' '}
            <button type="button" id="cancel-no" onClick={() => setConfirming(false)}>
              {t('job.cancelNo')}
            </button>
          </div>
        ) : (
          <button type="button" class="danger" id="cancel" onClick={() => setConfirming(true)}>
            {t('job.cancel')}
          </button>
        ))}
      <Placement job={job} />
      <Utilization job={job} />
      <JobCost job={job} />
      <Timeline job={job} />
      <LiveLog
        id={job.id}
        finished={() => (jobRef.current ? isFinished(jobRef.current.state) : false)}
        onEnded={() => refreshRef.current()}
      />
    </section>
  );
}
