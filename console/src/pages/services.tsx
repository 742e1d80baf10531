// Inference services and interactive sessions: the list (/ui/services,
// kind and tenant filters in the URL, a page at a time like the jobs list)
// and one service (/ui/services/TENANT/NAME): its spec in short, its status
// with each replica's job, the kept revisions newest first, its canary
// step, a session's lifetime and idle window, and, for a caller who may
// change it, scale, rollback, resume and delete (services.ts decides who).
//
// A service's replicas are jobs of its tenant, so both pages ask again on
// job events (the detail only on its tenant's), at most once a burst, and
// poll while the stream is down. What sends no event (a replica's probe
// turning ready, the autoscaler's decision, SLO figures) is asked on the
// "while live" interval.

import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../api';
import { guard, Link, useConsole } from '../app';
import { type Key, labelOf, stateLabel } from '../i18n';
import { usePagedList } from '../paging';
import {
  appendServices,
  checkScale,
  kindOf,
  parseServiceFilters,
  revisionChanges,
  scaleFieldOf,
  scaleQuery,
  type Service,
  type ServiceFilters,
  serviceActions,
  serviceFilterParams,
  servicePath,
  serviceRow,
  sessionEnd,
  sloState,
} from '../services';
import { LiveStatus, useLiveRefresh } from './live-status';

export const SERVICES_POLL_MS = 10000;
export const SERVICES_LIVE_POLL_MS = 30000;
export const SERVICE_POLL_MS = 5000;
export const SERVICE_LIVE_POLL_MS = 15000;

function useWhen() {
  const { lang, t } = useConsole();
  return (ms: number | null | undefined) =>
    ms ? new Date(ms).toLocaleString(lang === 'zh' ? 'zh-CN' : 'en-GB') : t('common.none');
}

const pct = (share: number | null | undefined, digits = 2) =>
  share === null || share === undefined ? '—' : `${(share * 100).toFixed(digits)}%`;

// "step 2 of 3, 50% of requests" (and "waiting for resume").
function CanaryText({ s }: { s: Service }) {
  const { t } = useConsole();
  const c = s.status?.canary;
  if (!c) return null;
  return (
    <span class="canary">
      {t('svc.canaryStep', { step: c.step, steps: c.steps, weight: c.weight_pct })}
      {c.awaiting_resume && <> · {t('svc.awaitingResume')}</>}
    </span>
  );
}

export function ServicesPage({ search }: { search: string }) {
  const ctx = useConsole();
  const { t, lang, api } = ctx;
  const filters = parseServiceFilters(search);
  const key = serviceFilterParams(filters).toString();
  const list = usePagedList<Service>(
    key,
    async (after) => {
      const page = await guard(ctx, () => api.services(filters, after));
      return page instanceof ApiError ? page : { items: page.services, next: page.next };
    },
    appendServices,
  );
  const { rows, next, error, more } = list;
  const live = useLiveRefresh(
    {
      topics: ['job'],
      pollMs: SERVICES_POLL_MS,
      livePollMs: SERVICES_LIVE_POLL_MS,
      match: (e) => e.topic === 'job' && (!filters.tenant || e.data.tenant === filters.tenant),
    },
    () => void list.refresh(),
  );

  const apply = (e: Event) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget as HTMLFormElement);
    const kind = String(data.get('kind') ?? '');
    const f: ServiceFilters = {
      kind: kind === 'service' || kind === 'session' ? kind : '',
      tenant: String(data.get('tenant') ?? ''),
    };
    const q = serviceFilterParams(f).toString();
    ctx.navigate(q ? `/ui/services?${q}` : '/ui/services');
  };

  return (
    <section aria-labelledby="services-title">
      <h1 id="services-title">{t('svc.title')}</h1>
      <form class="filters" onSubmit={apply} key={key} aria-label={t('jobs.filters')}>
        <label>
          {t('svc.kind')}{' '}
          <select name="kind" id="filter-kind" defaultValue={filters.kind}>
            <option value="">{t('svc.anyKind')}</option>
            <option value="service">{t('svc.kind.service')}</option>
            <option value="session">{t('svc.kind.session')}</option>
          </select>
        </label>
        <label>
          {t('jobs.tenant')} <input name="tenant" id="filter-tenant" defaultValue={filters.tenant} />
        </label>
        <button type="submit">{t('jobs.apply')}</button> <Link href="/ui/services">{t('jobs.clear')}</Link>
      </form>
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error.message })}
        </p>
      )}
      {rows === null ? (
        <p role="status">{t('common.loading')}</p>
      ) : rows.length === 0 ? (
        <p role="status" id="services-empty">
          {t('svc.empty')}
        </p>
      ) : (
        <table class="jobs services" id="services-table">
          <caption>
            {t('svc.count', { count: rows.length })} · <LiveStatus state={live} pollMs={SERVICES_POLL_MS} />
          </caption>
          <thead>
            <tr>
              <th scope="col">{t('col.tenant')}</th>
              <th scope="col">{t('col.name')}</th>
              <th scope="col">{t('svc.kind')}</th>
              <th scope="col">{t('svc.replicas')}</th>
              <th scope="col">{t('svc.revision')}</th>
              <th scope="col">{t('svc.rollout')}</th>
              <th scope="col">{t('svc.slo')}</th>
              <th scope="col">{t('svc.endpoint')}</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((s) => {
              const r = serviceRow(s);
              return (
                <tr key={r.key} data-service={r.key}>
                  <td>{r.tenant}</td>
                  <td>
                    <Link href={servicePath(s)}>{r.name}</Link>
                  </td>
                  <td>{t(`svc.kind.${r.kind}` as Key)}</td>
                  <td class="replicas">
                    {t('svc.readyOf', { ready: r.ready, desired: r.desired })}{' '}
                    <span class="bounds">({r.min === r.max ? r.min : `${r.min}–${r.max}`})</span>
                  </td>
                  <td>{r.revision}</td>
                  <td class={`phase phase-${r.phase}`}>
                    {labelOf(lang, 'svc.phase', r.phase)}
                    {r.canary && (
                      <>
                        {' · '}
                        <CanaryText s={s} />
                      </>
                    )}
                  </td>
                  <td class={`slo slo-${r.slo}`}>{t(`svc.sloState.${r.slo}` as Key)}</td>
                  <td>{r.endpoint ? <code>{r.endpoint}</code> : t('svc.noEndpoint')}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {next && rows && (
        <button type="button" id="services-more" onClick={more}>
          {t('jobs.more')}
        </button>
      )}
    </section>
  );
}

type Confirm = 'rollback' | 'delete' | null;

export function ServicePage({ tenant, name }: { tenant: string; name: string }) {
  const ctx = useConsole();
  const { t, lang, api, caller } = ctx;
  const when = useWhen();
  const [svc, setSvc] = useState<Service | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [confirm, setConfirm] = useState<Confirm>(null);
  const [notice, setNotice] = useState('');
  const [failure, setFailure] = useState('');
  const [scale, setScale] = useState({ min: '', max: '' });
  const [scaleErrors, setScaleErrors] = useState<{ min?: string; max?: string; form?: string }>({});
  const [busy, setBusy] = useState(false);
  const seq = useRef(0);

  const load = async () => {
    const mine = ++seq.current;
    const s = await guard(ctx, () => api.service(tenant, name));
    if (mine !== seq.current) return;
    if (s instanceof ApiError) return setError(s);
    setError(null);
    setSvc(s);
  };

  useEffect(() => {
    setSvc(null);
    setError(null);
    setNotice('');
    setFailure('');
    setConfirm(null);
    void load();
    return () => {
      seq.current++;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [tenant, name]);

  const gone = error?.status === 404;
  const live = useLiveRefresh(
    {
      topics: ['job'],
      pollMs: SERVICE_POLL_MS,
      livePollMs: SERVICE_LIVE_POLL_MS,
      active: !gone,
      match: (e) => e.topic === 'job' && e.data.tenant === tenant,
    },
    () => void load(),
  );

  if (gone) {
    return (
      <section>
        <p>
          <Link href="/ui/services">{t('svc.back')}</Link>
        </p>
        <h1>{t('svc.titleOne', { tenant, name })}</h1>
        <p role="alert" id="service-missing">
          {t('svc.notFound', { tenant, name })}
        </p>
      </section>
    );
  }
  if (!svc) {
    return error ? (
      <p class="error" role="alert">
        {t('common.error', { message: error.message })}
      </p>
    ) : (
      <p role="status">{t('common.loading')}</p>
    );
  }

  const kind = kindOf(svc);
  const spec = svc.spec ?? ({} as Service['spec']);
  const st = svc.status;
  const actions = serviceActions(caller, svc);
  const bounds = spec.replicas ?? { min: 1, max: 1 };
  const end = sessionEnd(st?.session);

  // Runs a change; its answer (the service) is shown, a refusal said.
  const act = async (fn: () => Promise<unknown>, done: string, reload = true): Promise<ApiError | null> => {
    setBusy(true);
    setFailure('');
    setNotice('');
    const r = await guard(ctx, fn);
    setBusy(false);
    if (r instanceof ApiError) {
      setFailure(t('svc.actionFailed', { message: r.message }));
      return r;
    }
    setNotice(done);
    if (!reload) return null;
    if (r && typeof r === 'object' && 'status' in (r as object) && 'spec' in (r as object)) setSvc(r as Service);
    void load();
    return null;
  };

  const submitScale = async (e: Event) => {
    e.preventDefault();
    // What the inputs hold now (typed faster than a render is still typed).
    const form = e.currentTarget as HTMLFormElement;
    const value = (f: 'min' | 'max') => (form.querySelector(`#scale-${f}`) as HTMLInputElement | null)?.value ?? scale[f];
    const c = checkScale(value('min'), value('max'), bounds);
    if (c.errors.length) {
      const errs: { min?: string; max?: string } = {};
      for (const err of c.errors) errs[err.field] = t(`svc.scaleError.${err.kind}` as Key, { max: 1024 });
      return setScaleErrors(errs);
    }
    setScaleErrors({});
    const q = scaleQuery(c);
    const r = await act(() => api.scaleService(tenant, name, q), t('svc.scaled', { min: c.min ?? bounds.min, max: c.max ?? bounds.max }));
    if (r) {
      setFailure('');
      const field = scaleFieldOf(r.field);
      setScaleErrors(field ? { [field]: r.message } : { form: r.message });
    } else {
      setScale({ min: '', max: '' });
    }
  };

  const scaleInput = (field: 'min' | 'max') => (
    <p class="field">
      <label for={`scale-${field}`}>{t(`svc.scale.${field}` as Key)}</label>{' '}
      <input
        id={`scale-${field}`}
        name={field}
        inputMode="numeric"
        autocomplete="off"
        placeholder={String(bounds[field])}
        value={scale[field]}
        aria-invalid={scaleErrors[field] ? 'true' : undefined}
        aria-describedby={scaleErrors[field] ? `scale-${field}-error` : undefined}
        onInput={(e) => setScale({ ...scale, [field]: (e.currentTarget as HTMLInputElement).value })}
      />
      {scaleErrors[field] && (
        <span class="error field-error" role="alert" id={`scale-${field}-error`}>
          {scaleErrors[field]}
        </span>
      )}
    </p>
  );

  const revisions = revisionChanges(svc.revisions);
  const replicas = [...(st?.replicas ?? [])].sort((a, b) => a.job - b.job);
  const slo = st?.slo;

  return (
    <section aria-labelledby="service-title">
      <p>
        <Link href="/ui/services">{t('svc.back')}</Link>
      </p>
      <h1 id="service-title">
        {t(kind === 'session' ? 'svc.titleSession' : 'svc.titleOne', { tenant: svc.tenant, name: svc.name })}
      </h1>
      <p class="live-line">
        <LiveStatus state={live} pollMs={SERVICE_POLL_MS} />
      </p>

      <h2>{t('svc.specTitle')}</h2>
      <dl class="summary" id="service-spec">
        <dt>{t('svc.kind')}</dt>
        <dd>{t(`svc.kind.${kind}` as Key)}</dd>
        <dt>{t('col.tenant')}</dt>
        <dd>{svc.tenant}</dd>
        <dt>{t('col.queue')}</dt>
        <dd>{svc.queue}</dd>
        {spec.model?.name && (
          <>
            <dt>{t('svc.model')}</dt>
            <dd>
              <code>{spec.model.version ? `${spec.model.name} (${spec.model.version})` : spec.model.name}</code>
            </dd>
          </>
        )}
        {spec.image && (
          <>
            <dt>{t('svc.image')}</dt>
            <dd>
              <code>{spec.image}</code>
            </dd>
          </>
        )}
        {spec.command && spec.command.length > 0 && (
          <>
            <dt>{t('svc.command')}</dt>
            <dd>
              <code>{spec.command.join(' ')}</code>
            </dd>
          </>
        )}
        {spec.resources && (
          <>
            <dt>{t('svc.resources')}</dt>
            <dd id="service-resources">
              {t('svc.resourcesText', {
                gpus: spec.resources.gpus,
                gpuMemory: spec.resources.gpu_memory,
                cpu: spec.resources.cpu,
                memory: spec.resources.memory,
              })}
            </dd>
          </>
        )}
        <dt>{t('svc.bounds')}</dt>
        <dd id="service-bounds">{t('svc.boundsText', { min: bounds.min, max: bounds.max })}</dd>
        {spec.autoscaling && (
          <>
            <dt>{t('svc.autoscaling')}</dt>
            <dd>
              {t('svc.autoscalingText', { signal: spec.autoscaling.signal, target: spec.autoscaling.target })}
              {spec.autoscaling.scale_to_zero?.enabled && <> · {t('svc.scaleToZero')}</>}
            </dd>
          </>
        )}
        {spec.slo && (
          <>
            <dt>{t('svc.sloTarget')}</dt>
            <dd id="service-slo-target">
              {spec.slo.latency_p95_ms
                ? t('svc.sloTargetText', { p95: spec.slo.latency_p95_ms, availability: spec.slo.availability })
                : t('svc.sloAvailability', { availability: spec.slo.availability })}
            </dd>
          </>
        )}
        {spec.rollout?.canary && spec.rollout.canary.length > 0 && (
          <>
            <dt>{t('svc.canarySteps')}</dt>
            <dd>{spec.rollout.canary.map((c) => `${c.weight} (${c.pause})`).join(' → ')}</dd>
          </>
        )}
        {spec.session && (
          <>
            <dt>{t('svc.maxLifetime')}</dt>
            <dd id="session-lifetime">{spec.session.max_lifetime}</dd>
            <dt>{t('svc.idleWindow')}</dt>
            <dd id="session-idle">
              {spec.session.idle_window === '0s' ? t('svc.neverIdle') : spec.session.idle_window} ·{' '}
              {t('svc.idleBelow', { pct: spec.session.idle_gpu_utilization })}
            </dd>
          </>
        )}
        <dt>{t('svc.updated')}</dt>
        <dd>{t('svc.byAt', { who: svc.updated_by, when: when(svc.updated_ms) })}</dd>
      </dl>

      <h2>{t('svc.statusTitle')}</h2>
      <dl class="summary" id="service-status">
        <dt>{t('svc.rollout')}</dt>
        <dd id="service-phase" class={`phase phase-${st?.phase ?? 'pending'}`}>
          {labelOf(lang, 'svc.phase', st?.phase ?? 'pending')}
        </dd>
        <dt>{t('svc.replicas')}</dt>
        <dd id="service-ready">
          {t('svc.readyOf', { ready: st?.ready ?? 0, desired: st?.desired ?? 0 })} ·{' '}
          {t('svc.counts', {
            running: st?.running ?? 0,
            starting: st?.starting ?? 0,
            stopping: st?.stopping ?? 0,
            notReady: st?.not_ready ?? 0,
          })}
        </dd>
        <dt>{t('svc.revision')}</dt>
        <dd>{svc.revision}</dd>
        <dt>{t('svc.endpoint')}</dt>
        <dd id="service-endpoint">{st?.endpoint ? <code>{st.endpoint}</code> : t('svc.noEndpoint')}</dd>
        {st?.canary && (
          <>
            <dt>{t('svc.canary')}</dt>
            <dd id="service-canary">
              <CanaryText s={svc} /> ·{' '}
              {t('svc.canaryReplicas', { ready: st.canary.ready, replicas: st.canary.replicas })}
              {st.canary.pause_ends_ms && <> · {t('svc.pauseEnds', { when: when(st.canary.pause_ends_ms) })}</>}
            </dd>
          </>
        )}
        {st?.waiting && (
          <>
            <dt>{t('svc.waiting')}</dt>
            <dd lang="en">{st.waiting}</dd>
          </>
        )}
        {st?.refused && (
          <>
            <dt>{t('svc.refused')}</dt>
            <dd lang="en">{st.refused}</dd>
          </>
        )}
        {!!st?.recent_crashes && (
          <>
            <dt>{t('svc.crashes')}</dt>
            <dd>
              {st.recent_crashes}
              {st.backoff_until_ms && <> · {t('svc.backoffUntil', { when: when(st.backoff_until_ms) })}</>}
            </dd>
          </>
        )}
        {st?.autoscale && (
          <>
            <dt>{t('svc.autoscaler')}</dt>
            <dd lang="en">{st.autoscale.reason}</dd>
          </>
        )}
        {kind === 'service' && (
          <>
            <dt>{t('svc.slo')}</dt>
            <dd id="service-slo">
              {t(`svc.sloState.${sloState(slo)}` as Key)}
              {slo && slo.requests > 0 && (
                <>
                  {' · '}
                  {t('svc.sloFigures', {
                    availability: pct(slo.availability, 3),
                    attainment: pct(slo.latency_attainment, 1),
                    burn: slo.error_budget_burn === null ? '—' : slo.error_budget_burn.toFixed(2),
                    requests: slo.requests,
                  })}
                </>
              )}
            </dd>
          </>
        )}
        {end && (
          <>
            <dt>{t('svc.sessionEnds')}</dt>
            <dd id="session-ends">
              {when(end.at_ms)} ({t(end.cause === 'idle' ? 'svc.endsIdle' : 'svc.endsLifetime')})
            </dd>
          </>
        )}
      </dl>

      <h3>{t('svc.replicaJobs')}</h3>
      {replicas.length === 0 ? (
        <p id="service-no-replicas">{t('svc.noReplicas')}</p>
      ) : (
        <table class="jobs" id="service-replicas">
          <thead>
            <tr>
              <th scope="col">{t('svc.job')}</th>
              <th scope="col">{t('svc.revision')}</th>
              <th scope="col">{t('col.state')}</th>
              <th scope="col">{t('svc.readyCol')}</th>
              <th scope="col">{t('svc.node')}</th>
              <th scope="col">{t('svc.port')}</th>
              <th scope="col">{t('svc.probe')}</th>
            </tr>
          </thead>
          <tbody>
            {replicas.map((r) => (
              <tr data-job={r.job}>
                <td>
                  <Link href={`/ui/jobs/${r.job}`}>{r.job}</Link>
                </td>
                <td>
                  {r.revision}
                  {!r.current && <> ({t('svc.oldSpec')})</>}
                </td>
                <td class={`state state-${r.state}`}>
                  {stateLabel(lang, r.state)}
                  {r.stopping && <> · {t('svc.stopping')}</>}
                  {r.reason?.code && (
                    <>
                      {' · '}
                      <code>{r.reason.code}</code>
                    </>
                  )}
                </td>
                <td>{r.ready ? t('svc.yes') : t('svc.no')}</td>
                <td>{r.node ? <Link href={`/ui/fleet/${encodeURIComponent(r.node)}`}>{r.node}</Link> : '—'}</td>
                <td>{r.port ?? '—'}</td>
                <td>{r.probe ? <span lang="en">{r.probe}</span> : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <h2>{t('svc.revisionsTitle')}</h2>
      {revisions.length === 0 ? (
        <p>{t('common.none')}</p>
      ) : (
        <table class="jobs" id="service-revisions">
          <thead>
            <tr>
              <th scope="col">{t('svc.revision')}</th>
              <th scope="col">{t('svc.change')}</th>
              <th scope="col">{t('svc.by')}</th>
              <th scope="col">{t('svc.when')}</th>
              <th scope="col">{t('svc.image')}</th>
              <th scope="col">{t('svc.bounds')}</th>
            </tr>
          </thead>
          <tbody>
            {revisions.map((r) => (
              <tr data-revision={r.revision}>
                <td>
                  {r.revision}
                  {r.revision === svc.revision && <> ({t('svc.current')})</>}
                </td>
                <td>
                  {labelOf(lang, 'svc.change', r.change)}
                  {r.restores !== null && <> · {t('svc.restores', { revision: r.restores })}</>}
                </td>
                <td>{r.created_by}</td>
                <td>{when(r.created_ms)}</td>
                <td>
                  {r.image ? <code>{r.image}</code> : '—'}
                  {r.image_from !== null && <> ({t('svc.was', { value: r.image_from || '—' })})</>}
                </td>
                <td>
                  {r.min}–{r.max}
                  {r.bounds_from && <> ({t('svc.was', { value: `${r.bounds_from.min}–${r.bounds_from.max}` })})</>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      {(actions.scale || actions.rollback || actions.resume || actions.delete) && (
        <div class="service-actions" id="service-actions">
          <h2>{t('svc.actionsTitle')}</h2>
          {notice && (
            <p role="status" id="service-notice">
              {notice}
            </p>
          )}
          {failure && (
            <p class="error" role="alert" id="service-failure">
              {failure}
            </p>
          )}
          {actions.scale && (
            <form id="scale-form" onSubmit={submitScale} aria-labelledby="scale-title" noValidate>
              <h3 id="scale-title">{t('svc.scaleTitle')}</h3>
              {scaleErrors.form && (
                <p class="error" role="alert" id="scale-error">
                  {scaleErrors.form}
                </p>
              )}
              {scaleInput('min')}
              {scaleInput('max')}
              <button type="submit" id="scale-submit" disabled={busy}>
                {t('svc.scale')}
              </button>
            </form>
          )}
          {actions.resume && (
            <p>
              <button
                type="button"
                id="resume"
                disabled={busy}
                onClick={() => void act(() => api.resumeRollout(tenant, name), t('svc.resumed'))}
              >
                {t('svc.resume')}
              </button>
            </p>
          )}
          {confirm === 'rollback' ? (
            <div class="confirm" role="group" aria-labelledby="rollback-question">
              <p id="rollback-question">{t('svc.rollbackConfirm', { revision: svc.revision })}</p>
              <button
                type="button"
                class="danger"
                id="rollback-yes"
                onClick={() => {
                  setConfirm(null);
                  void act(() => api.rollbackService(tenant, name), t('svc.rolledBack'));
                }}
              >
                {t('svc.rollbackYes')}
              </button>{' '}
              <button type="button" id="rollback-no" onClick={() => setConfirm(null)}>
                {t('svc.keep')}
              </button>
            </div>
          ) : (
            actions.rollback && (
              <p>
                <button type="button" id="rollback" disabled={busy} onClick={() => setConfirm('rollback')}>
                  {t('svc.rollback')}
                </button>
              </p>
            )
          )}
          {confirm === 'delete' ? (
            <div class="confirm" role="group" aria-labelledby="delete-question">
              <p id="delete-question">
                {t(kind === 'session' ? 'svc.deleteSessionConfirm' : 'svc.deleteConfirm', { tenant, name })}
              </p>
              <button
                type="button"
                class="danger"
                id="delete-yes"
                onClick={async () => {
                  setConfirm(null);
                  const r = await act(() => api.deleteService(tenant, name), t('svc.deleted'), false);
                  if (!r) ctx.navigate('/ui/services');
                }}
              >
                {t('svc.deleteYes')}
              </button>{' '}
              <button type="button" id="delete-no" onClick={() => setConfirm(null)}>
                {t('svc.keep')}
              </button>
            </div>
          ) : (
            actions.delete && (
              <p>
                <button type="button" class="danger" id="delete" disabled={busy} onClick={() => setConfirm('delete')}>
                  {t(kind === 'session' ? 'svc.stopSession' : 'svc.delete')}
                </button>
              </p>
            )
          )}
        </div>
      )}
    </section>
  );
}
