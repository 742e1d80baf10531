// The jobs list: what `berth jobs` shows the caller, newest first, filtered
// by state, queue and tenant (the filters live in the URL), a page at a
// time, with a link to submit one for a caller whose role may. The first
// page is asked again, while it is the only one shown, when job events
// arrive (a burst is one request), or every POLL_MS while the event stream
// is down. Any job event counts: an event names the job's tenant, queue and
// state, but a job leaving the filter's states must leave the list too.
// A pending job's reason moves with no event, so while the list shows one
// it is also asked every PENDING_LIVE_POLL_MS.

import type { JobSummary } from '../api';
import { ApiError } from '../api';
import { guard, Link, useConsole } from '../app';
import { JOB_STATES, stateLabel } from '../i18n';
import { usePagedList } from '../paging';
import { appendPage, filterParams, type JobFilters, parseFilters } from '../query';
import { canSubmit } from '../submit';
import { LiveStatus, useLiveRefresh } from './live-status';

export const POLL_MS = 5000;
export const PENDING_LIVE_POLL_MS = 60000;

export function JobsPage({ search }: { search: string }) {
  const ctx = useConsole();
  const { t, lang, api } = ctx;
  const filters = parseFilters(search);
  const key = filterParams(filters).toString();
  const list = usePagedList<JobSummary>(
    key,
    async (after) => {
      const page = await guard(ctx, () => api.listJobs(filters, after));
      return page instanceof ApiError ? page : { items: page.jobs, next: page.next };
    },
    appendPage,
  );
  const { rows, next, error, more } = list;
  const waiting = rows?.some((j) => j.state === 'Pending') ?? false;
  const live = useLiveRefresh(
    { topics: ['job'], pollMs: POLL_MS, livePollMs: waiting ? PENDING_LIVE_POLL_MS : undefined },
    () => void list.refresh(),
  );

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
          {t('common.error', { message: error.message })}
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
            {t('jobs.count', { count: rows.length })} · <LiveStatus state={live} pollMs={POLL_MS} />
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
