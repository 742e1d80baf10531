// The jobs list: what `berth jobs` shows the caller, newest first, filtered
// by state, queue and tenant (the filters live in the URL), a page at a
// time, with a link to submit one for a caller whose role may. The first
// page is asked again every POLL_MS while it is the only one shown (live
// updates by polling in this slice; server-sent events come later).

import { useEffect, useState } from 'preact/hooks';
import type { JobSummary } from '../api';
import { guard, Link, useConsole } from '../app';
import { JOB_STATES, stateLabel } from '../i18n';
import { appendPage, filterParams, type JobFilters, parseFilters } from '../query';
import { canSubmit } from '../submit';

export const POLL_MS = 5000;

export function JobsPage({ search }: { search: string }) {
  const ctx = useConsole();
  const { t, lang, api } = ctx;
  const filters = parseFilters(search);
  const key = filterParams(filters).toString();
  const [rows, setRows] = useState<JobSummary[] | null>(null);
  const [next, setNext] = useState<string | undefined>(undefined);
  const [, setPages] = useState(1);
  const [error, setError] = useState('');

  useEffect(() => {
    let alive = true;
    setRows(null);
    setPages(1);
    const load = async () => {
      const page = await guard(ctx, () => api.listJobs(filters));
      if (!alive) return;
      if (page instanceof Error) return setError(page.message);
      setError('');
      setRows(page.jobs);
      setNext(page.next);
    };
    void load();
    const timer = setInterval(() => {
      // Only while one page is shown: refreshing would drop the others.
      setPages((p) => {
        if (p === 1) void load();
        return p;
      });
    }, POLL_MS);
    return () => {
      alive = false;
      clearInterval(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);

  const more = async () => {
    if (!next || !rows) return;
    const page = await guard(ctx, () => api.listJobs(filters, next));
    if (page instanceof Error) return setError(page.message);
    setRows(appendPage(rows, page.jobs));
    setNext(page.next);
    setPages((p) => p + 1);
  };

  const apply = (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const f: JobFilters = {
      state: data.getAll('state').map(String),
      queue: String(data.get('queue') ?? ''),
      tenant: String(data.get('tenant') ?? ''),
    };
    const q = filterParams(f).toString();
    ctx.navigate(q ? `/ui/jobs?${q}` : '/ui/jobs');
  };

  return (
    <section aria-labelledby="jobs-title">
      <h1 id="jobs-title">{t('jobs.title')}</h1>
      {canSubmit(ctx.caller) && (
        <p>
          <Link href="/ui/submit" class="button" id="submit-link">
            {t('jobs.submit')}
          </Link>
        </p>
      )}
      <form class="filters" onSubmit={apply} key={key} aria-label={t('jobs.filters')}>
        <fieldset>
          <legend>{t('jobs.state')}</legend>
          {JOB_STATES.map((s) => (
            <label class="check">
              <input type="checkbox" name="state" value={s} defaultChecked={filters.state.includes(s)} />{' '}
              {stateLabel(lang, s)}
            </label>
          ))}
        </fieldset>
        <label>
          {t('jobs.queue')} <input name="queue" id="filter-queue" defaultValue={filters.queue} />
        </label>
        <label>
          {t('jobs.tenant')} <input name="tenant" id="filter-tenant" defaultValue={filters.tenant} />
        </label>
        <button type="submit">{t('jobs.apply')}</button>{' '}
        <Link href="/ui/jobs">{t('jobs.clear')}</Link>
      </form>
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error })}
        </p>
      )}
      {rows === null ? (
        <p role="status">{t('common.loading')}</p>
      ) : rows.length === 0 ? (
        <p role="status" id="jobs-empty">
          {t('jobs.empty')}
        </p>
      ) : (
        <table class="jobs" id="jobs-table">
          <caption>
            {t('jobs.count', { count: rows.length })} · {t('jobs.polling', { seconds: POLL_MS / 1000 })}
          </caption>
          <thead>
            <tr>
              <th scope="col">{t('col.id')}</th>
              <th scope="col">{t('col.name')}</th>
              <th scope="col">{t('col.tenant')}</th>
              <th scope="col">{t('col.queue')}</th>
              <th scope="col">{t('col.state')}</th>
              <th scope="col">{t('col.user')}</th>
              <th scope="col">{t('col.gpus')}</th>
              <th scope="col">{t('col.reason')}</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((j) => (
              <tr key={j.id} data-job={j.id}>
                <td>
                  <Link href={`/ui/jobs/${j.id}`}>{j.id}</Link>
                </td>
                <td>
                  <Link href={`/ui/jobs/${j.id}`}>{j.name}</Link>
                </td>
                <td>{j.tenant}</td>
                <td>{j.queue}</td>
                <td class={`state state-${j.state}`}>{stateLabel(lang, j.state)}</td>
                <td>{j.submitted_by}</td>
                <td>{j.resources?.gpus ?? 0}</td>
                <td>
                  <code>{j.reason?.code ?? t('common.none')}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {next && rows && (
        <button type="button" id="jobs-more" onClick={more}>
          {t('jobs.more')}
        </button>
      )}
    </section>
  );
}
