// One job: its summary, why it is in its state (the server's reason in the
// chosen language, GET /v1/jobs/{id}/why?lang=, with the layers holding a
// waiting job and its estimated start), why it failed, where each attempt's
// replicas ran, its GPU utilization, its timeline, its output as it is
// written (LiveLog), and Cancel for a caller whose role may cancel it
// (job-detail.tsx has the parts below the summary).
//
// The job is asked for every POLL_MS until it has finished, one request a
// poll; its why only when the job's state or reason moved (and on a
// change of language). When the log's stream ends the job is asked for at
// once: that is usually the job finishing.

import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, canCancel, isFinished, jobShape, type JobSummary, type Why, whyMayHaveChanged } from '../api';
import { guard, Link, useConsole } from '../app';
import { stateLabel } from '../i18n';
import { FailureView, JobCost, Placement, Timeline, Utilization, WhyLayers } from './job-detail';
import { LiveLog } from './live-log';

export const POLL_MS = 3000;

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
    let timer: ReturnType<typeof setTimeout> | undefined;
    let busy = false;
    let last: JobSummary | null = null;
    const load = async () => {
      if (busy) return;
      busy = true;
      clearTimeout(timer);
      const j = await guard(ctx, () => api.job(id));
      let w: Why | ApiError | null = null;
      if (alive && !(j instanceof ApiError) && whyMayHaveChanged(last, j)) w = await guard(ctx, () => api.why(id, lang));
      busy = false;
      if (!alive) return;
      const failed = j instanceof ApiError ? j : w instanceof ApiError ? w : null;
      if (failed) {
        setError(failed);
        if (failed.status !== 404 && failed.status !== 401) timer = setTimeout(load, POLL_MS);
        return;
      }
      const fresh = j as JobSummary;
      setError(null);
      last = fresh;
      jobRef.current = fresh;
      setJob(fresh);
      if (w) setWhy(w as Why);
      // Stopped once the job has finished: nothing about it changes then.
      if (!isFinished(fresh.state)) timer = setTimeout(load, POLL_MS);
    };
    refreshRef.current = () => void load();
    void load();
    return () => {
      alive = false;
      clearTimeout(timer);
      refreshRef.current = () => undefined;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [id, lang, tick]);

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
