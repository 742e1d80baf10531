// One tenant (/ui/tenants/T): its queues' guarantees against what its jobs
// hold (GET /v1/queues, Berth's own figures), each queue's use per day over
// the last 14 days against its guarantee (tenant-history.tsx, its own
// request, at most once a minute), its members and roles, its quota requests (file, approve, reject,
// withdraw) and this month's cost by queue and by user, with its budget.
// Everything comes from the API with the caller's session: a caller with no
// role in the tenant gets the members route's 404 and the page asks for
// nothing else. Asked again on the events of the tenant's jobs (at most once
// every EVENT_GAP_MS: the page makes six requests), every LIVE_POLL_MS while
// live for what sends no event (running jobs' cost growing, quota requests,
// the policy), and every POLL_MS while the event stream is down; never
// again after a 404 or 403.

import { useEffect, useRef, useState } from 'preact/hooks';
import {
  ApiError,
  type Budget,
  type Member,
  type PolicyVersion,
  type Queues,
  type QuotaAction,
  type QuotaRequest,
  type TokenInfo,
  type Usage,
} from '../api';
import { guard, Link, useConsole } from '../app';
import { labelOf } from '../i18n';
import {
  canDecide,
  canFile,
  canWithdraw,
  EMPTY_FORM,
  formField,
  gpus,
  type QuotaForm,
  queueRows,
  quotaRequestBody,
  tenantsFor,
  tokenOwners,
  tokenState,
  usedPercent,
} from '../tenant';
import { LiveStatus, useLiveRefresh } from './live-status';
import { QuotaHistory } from './tenant-history';

export const POLL_MS = 10000;
export const LIVE_POLL_MS = 60000;
export const EVENT_GAP_MS = 5000;

interface Loaded {
  queues: Queues;
  members: Member[];
  requests: QuotaRequest[];
  byQueue: Usage;
  byUser: Usage;
  budget: Budget | null;
}

// /ui/tenants: the tenants the caller may open.
export function TenantsPage() {
  const ctx = useConsole();
  const { t, api, caller } = ctx;
  const [policy, setPolicy] = useState<PolicyVersion | null>(null);
  useEffect(() => {
    if (!caller.platform_admin) return;
    void guard(ctx, () => api.policy()).then((r) => {
      if (!(r instanceof ApiError)) setPolicy(r);
    });
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  const names = tenantsFor(caller, policy?.policy.queues ?? null);
  return (
    <section>
      <h1>{t('tenants.title')}</h1>
      {names.length === 0 ? (
        <p id="tenants-empty">{t('tenants.none')}</p>
      ) : (
        <ul id="tenant-list">
          {names.map((n) => (
            <li key={n}>
              <Link href={`/ui/tenants/${encodeURIComponent(n)}`}>{n}</Link>{' '}
              {caller.tenants[n] ? `(${labelOf(ctx.lang, 'role', caller.tenants[n])})` : ''}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

export function TenantPage({ tenant }: { tenant: string }) {
  const ctx = useConsole();
  const { t, lang, api, caller } = ctx;
  const [data, setData] = useState<Loaded | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [tick, setTick] = useState(0);

  const loadRef = useRef<() => void>(() => undefined);
  useEffect(() => {
    let alive = true;
    let seq = 0;
    const load = async () => {
      const mine = ++seq;
      // Members first: a caller with no role in the tenant gets 404 here,
      // and the page then asks for nothing of the tenant.
      const members = await guard(ctx, () => api.members(tenant));
      if (!alive || mine !== seq) return;
      if (members instanceof ApiError) return setError(members);
      const r = await guard(ctx, async () => {
        const [queues, requests, byQueue, byUser, budgets] = await Promise.all([
          api.queues(tenant),
          api.quotaRequests(tenant),
          api.usage('queue', tenant),
          api.usage('user', tenant),
          api.budgets(),
        ]);
        const budget = budgets.budgets.find((b) => b.tenant === tenant) ?? null;
        return { queues, members: members.members, requests, byQueue, byUser, budget };
      });
      if (!alive || mine !== seq) return;
      if (r instanceof ApiError) return setError(r);
      setError(null);
      setData(r);
    };
    loadRef.current = () => void load();
    void load();
    return () => {
      alive = false;
      loadRef.current = () => undefined;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [tenant, tick]);

  const denied = error !== null && (error.status === 404 || error.status === 403);
  const live = useLiveRefresh(
    {
      topics: ['job'],
      pollMs: POLL_MS,
      livePollMs: LIVE_POLL_MS,
      active: !denied,
      delayMs: 500,
      minIntervalMs: EVENT_GAP_MS,
      match: (e) => e.topic === 'job' && e.data.tenant === tenant,
    },
    () => loadRef.current(),
  );

  if (denied) {
    return (
      <section>
        <h1>{t('tenant.title', { tenant })}</h1>
        <p id="tenant-denied" role="alert">
          {t('tenant.notFound', { tenant })}
        </p>
        <Link href="/ui/tenants">{t('tenant.back')}</Link>
      </section>
    );
  }
  if (!data) {
    return error ? (
      <p class="error" role="alert">
        {t('common.error', { message: error.message })}
      </p>
    ) : (
      <p role="status">{t('common.loading')}</p>
    );
  }

  const rows = queueRows(data.queues.queues, tenant);
  const none = t('common.none');
  const when = (ms: number | null | undefined) =>
    ms ? new Date(ms).toLocaleString(lang === 'zh' ? 'zh-CN' : 'en-GB') : t('common.none');
  const role = caller.platform_admin ? t('tenant.platformAdmin') : labelOf(lang, 'role', caller.tenants[tenant] ?? '');

  return (
    <section>
      <h1>{t('tenant.title', { tenant })}</h1>
      <p id="tenant-role">{t('tenant.yourRole', { role })}</p>
      <p class="live-line">
        <LiveStatus state={live} pollMs={POLL_MS} />
      </p>
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error.message })}
        </p>
      )}

      <h2 id="queues-h">{t('tenant.queues')}</h2>
      <p id="queues-help" class="hint">{t('tenant.queuesHelp', { version: data.queues.policy_version })}</p>
      <table id="tenant-queues" aria-labelledby="queues-h">
        <thead>
          <tr>
            <th scope="col">{t('qcol.queue')}</th>
            <th scope="col">{t('qcol.guaranteed')}</th>
            <th scope="col">{t('qcol.used')}</th>
            <th scope="col">{t('qcol.jobs')}</th>
            <th scope="col">{t('qcol.borrowed')}</th>
            <th scope="col">{t('qcol.idle')}</th>
            <th scope="col">{t('qcol.lendable')}</th>
            <th scope="col">{t('qcol.limits')}</th>
            <th scope="col">{t('qcol.bar')}</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((q) => {
            const pct = usedPercent(q);
            const g = q.quota;
            return (
              <tr key={q.path} data-queue={q.path}>
                <th scope="row" class={`depth-${Math.min(q.depth, 3)}`}>
                  {q.path}
                </th>
                <td class="guaranteed">{g ? gpus(g.guaranteed) : t('tenant.noQuota')}</td>
                <td class="used">{gpus(q.used)}</td>
                <td class="jobs">{q.runningJobs}</td>
                <td class="borrowed">{g ? gpus(g.borrowed) : none}</td>
                <td class="idle">{g ? gpus(g.idle) : none}</td>
                <td class="lendable">{g ? gpus(g.lendable) : none}</td>
                <td class="limits">
                  {g
                    ? t('tenant.limits', {
                        borrow: g.borrowLimit === null ? t('tenant.noLimit') : gpus(g.borrowLimit),
                        kept: gpus(g.lendingLimit),
                      })
                    : none}
                </td>
                <td>
                  <meter
                    class={(g ? g.borrowed > 0 : q.used > 0) ? 'over' : ''}
                    min={0}
                    max={100}
                    value={pct}
                    aria-label={
                      g
                        ? t('tenant.bar', { queue: q.path, used: gpus(q.used), guaranteed: gpus(g.guaranteed) })
                        : t('tenant.barNoQuota', { queue: q.path, used: gpus(q.used) })
                    }
                  />
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>

      <QuotaHistory tenant={tenant} queues={data.queues.queues} />

      <h2 id="members-h">{t('tenant.members')}</h2>
      <table id="tenant-members" aria-labelledby="members-h">
        <thead>
          <tr>
            <th scope="col">{t('mcol.identity')}</th>
            <th scope="col">{t('mcol.kind')}</th>
            <th scope="col">{t('mcol.role')}</th>
          </tr>
        </thead>
        <tbody>
          {data.members.map((m) => (
            <tr key={m.identity} data-member={m.identity}>
              <td>{m.identity}</td>
              <td>{labelOf(lang, 'kind', m.kind)}</td>
              <td>
                {labelOf(lang, 'role', m.role)}
                {m.disabled ? ` (${t('tenant.disabled')})` : ''}
              </td>
            </tr>
          ))}
        </tbody>
      </table>

      <Tokens owners={tokenOwners(caller, tenant, data.members)} when={when} />

      <QuotaRequests tenant={tenant} requests={data.requests} queues={rows.map((r) => r.path)} reload={() => setTick((n) => n + 1)} when={when} />

      <h2 id="cost-h">{t('tenant.cost')}</h2>
      <p class="hint">
        {t('tenant.costWindow', { from: when(data.byQueue.from_ms), to: when(data.byQueue.to_ms) })}
      </p>
      <p id="tenant-budget">
        {data.budget
          ? t(data.budget.over ? 'tenant.budgetOver' : 'tenant.budget', {
              used: data.budget.used,
              limit: data.budget.limit,
              unit: data.budget.unit === 'gpu_hours' ? t('tenant.gpuHours') : data.budget.currency,
              month: data.budget.month,
            }) + (data.budget.enforce ? ` ${t('tenant.budgetEnforced')}` : '')
          : t('tenant.noBudget')}
      </p>
      <UsageTable id="cost-by-queue" by="queue" usage={data.byQueue} caption={t('tenant.byQueue')} />
      <UsageTable id="cost-by-user" by="user" usage={data.byUser} caption={t('tenant.byUser')} />
    </section>
  );
}

function UsageTable({ id, by, usage, caption }: { id: string; by: string; usage: Usage; caption: string }) {
  const { t } = useConsole();
  return (
    <table id={id}>
      <caption>{caption}</caption>
      <thead>
        <tr>
          <th scope="col">{by === 'queue' ? t('qcol.queue') : t('ucol.user')}</th>
          <th scope="col">{t('ucol.gpuHours')}</th>
          <th scope="col">{t('ucol.cost', { currency: usage.currency })}</th>
          <th scope="col">{t('ucol.runs')}</th>
        </tr>
      </thead>
      <tbody>
        {usage.rows.length === 0 && (
          <tr>
            <td colSpan={4}>{t('tenant.noUsage')}</td>
          </tr>
        )}
        {usage.rows.map((r) => (
          <tr key={r.key[by]} data-key={r.key[by]}>
            <th scope="row">{r.key[by]}</th>
            <td>{gpus(r.allocated_gpu_hours)}</td>
            <td>{r.cost}</td>
            <td>{r.runs}</td>
          </tr>
        ))}
      </tbody>
      <tfoot>
        <tr>
          <th scope="row">{t('ucol.total')}</th>
          <td>{gpus(usage.total.allocated_gpu_hours)}</td>
          <td>{usage.total.cost}</td>
          <td>{usage.total.runs}</td>
        </tr>
      </tfoot>
    </table>
  );
}

function QuotaRequests({
  tenant,
  requests,
  queues,
  reload,
  when,
}: {
  tenant: string;
  requests: QuotaRequest[];
  queues: string[];
  reload: () => void;
  when: (ms: number | null) => string;
}) {
  const ctx = useConsole();
  const { t, lang, api, caller } = ctx;
  // The form and the comments are read when a button is pressed: kept in a
  // ref as typed, so a press right after typing sends what was typed.
  const formRef = useRef<QuotaForm>({ ...EMPTY_FORM, queue: queues[0] ?? '' });
  const commentsRef = useRef<Record<number, string>>({});
  const [form, setFormState] = useState<QuotaForm>(formRef.current);
  const setForm = (patch: Partial<QuotaForm>) => {
    formRef.current = { ...formRef.current, ...patch };
    setFormState(formRef.current);
  };
  const [fieldErr, setFieldErr] = useState<{ field: keyof QuotaForm | ''; message: string } | null>(null);
  const [notice, setNotice] = useState<{ text: string; failed: boolean } | null>(null);
  const [comments, setCommentsState] = useState<Record<number, string>>({});
  const setComment = (id: number, v: string) => {
    commentsRef.current = { ...commentsRef.current, [id]: v };
    setCommentsState(commentsRef.current);
  };
  const [pending, setPending] = useState(false);

  const file = async (e: Event) => {
    e.preventDefault();
    setPending(true);
    const r = await guard(ctx, () => api.fileQuotaRequest(quotaRequestBody(formRef.current)));
    setPending(false);
    if (r instanceof ApiError) {
      setNotice(null);
      return setFieldErr({ field: formField(r.field), message: r.message });
    }
    setFieldErr(null);
    setForm({ ...EMPTY_FORM, queue: formRef.current.queue });
    setNotice({ text: t('qr.filed', { id: r.id }), failed: false });
    reload();
  };

  const decide = async (q: QuotaRequest, action: QuotaAction) => {
    const comment = commentsRef.current[q.id] ?? '';
    if (action === 'reject' && !comment.trim()) {
      return setNotice({ text: t('qr.commentRequired', { id: q.id }), failed: true });
    }
    setPending(true);
    const r = await guard(ctx, () => api.decideQuotaRequest(q.id, action, comment));
    setPending(false);
    if (r instanceof ApiError) return setNotice({ text: t('node.actionFailed', { message: r.message }), failed: true });
    const text =
      action === 'approve'
        ? t('qr.approved', { id: q.id, version: r.policy_version ?? '' })
        : action === 'reject'
          ? t('qr.rejected', { id: q.id })
          : t('qr.withdrawn', { id: q.id });
    setNotice({ text, failed: false });
    reload();
  };

  const input = (k: keyof QuotaForm, label: string, help = '') => {
    const bad = fieldErr?.field === k;
    return (
      <p>
        <label for={`qr-${k}`}>{label}</label>{' '}
        <input
          id={`qr-${k}`}
          value={form[k]}
          aria-invalid={bad ? 'true' : undefined}
          aria-describedby={bad ? `qr-${k}-error` : undefined}
          onInput={(e) => setForm({ [k]: (e.currentTarget as HTMLInputElement).value })}
        />{' '}
        {help && <span class="hint">{help}</span>}
        {bad && (
          <span id={`qr-${k}-error`} class="error field-error" role="alert">
            {fieldErr.message}
          </span>
        )}
      </p>
    );
  };

  const decider = canDecide(caller);
  const withdrawer = canWithdraw(caller, tenant);
  return (
    <>
      <h2 id="qr-h">{t('qr.title')}</h2>
      {notice && (
        <p id="qr-notice" class={notice.failed ? 'error' : ''} role={notice.failed ? 'alert' : 'status'}>
          {notice.text}
        </p>
      )}
      {requests.length === 0 ? (
        <p id="qr-empty">{t('qr.none')}</p>
      ) : (
        <table id="tenant-requests" aria-labelledby="qr-h">
          <thead>
            <tr>
              <th scope="col">{t('col.id')}</th>
              <th scope="col">{t('col.state')}</th>
              <th scope="col">{t('qcol.queue')}</th>
              <th scope="col">{t('qr.asked')}</th>
              <th scope="col">{t('qr.by')}</th>
              <th scope="col">{t('qr.reason')}</th>
              <th scope="col">{t('qr.decided')}</th>
              {(decider || withdrawer) && <th scope="col">{t('gcol.actions')}</th>}
            </tr>
          </thead>
          <tbody>
            {requests.map((q) => {
              const open = q.state === 'Pending';
              return (
                <tr key={q.id} data-request={q.id}>
                  <td>{q.id}</td>
                  <td class="state">{labelOf(lang, 'qstate', q.state)}</td>
                  <td>{q.queue}</td>
                  <td class="asked">
                    {t('qr.amounts', {
                      resource: q.resource,
                      guaranteed: q.guaranteed ?? t('qr.unchanged'),
                      borrow: q.borrow_limit ?? t('qr.unchanged'),
                      kept: q.lending_limit ?? t('qr.unchanged'),
                    })}
                  </td>
                  <td>
                    {q.filed_by} <small>{when(q.filed_ms)}</small>
                  </td>
                  <td>{q.reason}</td>
                  <td class="decided">
                    {q.decided_by
                      ? t('qr.decidedBy', { who: q.decided_by, comment: q.comment || t('common.none') }) +
                        (q.policy_version ? ` ${t('qr.version', { version: q.policy_version })}` : '')
                      : t('common.none')}
                  </td>
                  {(decider || withdrawer) && (
                    <td>
                      {open && decider && (
                        <>
                          <label for={`qr-comment-${q.id}`}>{t('qr.comment')}</label>{' '}
                          <input
                            id={`qr-comment-${q.id}`}
                            value={comments[q.id] ?? ''}
                            onInput={(e) => setComment(q.id, (e.currentTarget as HTMLInputElement).value)}
                          />{' '}
                          <button type="button" data-action="approve" disabled={pending} onClick={() => decide(q, 'approve')}>
                            {t('qr.approve')}
                          </button>{' '}
                          <button type="button" data-action="reject" disabled={pending} onClick={() => decide(q, 'reject')}>
                            {t('qr.reject')}
                          </button>{' '}
                        </>
                      )}
                      {open && withdrawer && (
                        <button type="button" data-action="withdraw" disabled={pending} onClick={() => decide(q, 'withdraw')}>
                          {t('qr.withdraw')}
                        </button>
                      )}
                    </td>
                  )}
                </tr>
              );
            })}
          </tbody>
        </table>
      )}

      {canFile(caller, tenant) && (
        <form id="qr-form" class="filters" onSubmit={file} noValidate>
          <h3>{t('qr.file')}</h3>
          {fieldErr && !fieldErr.field && (
            <p id="qr-form-error" class="error" role="alert">
              {fieldErr.message}
            </p>
          )}
          <p>
            <label for="qr-queue">{t('qcol.queue')}</label>{' '}
            <select
              id="qr-queue"
              value={form.queue}
              aria-invalid={fieldErr?.field === 'queue' ? 'true' : undefined}
              aria-describedby={fieldErr?.field === 'queue' ? 'qr-queue-error' : undefined}
              onChange={(e) => setForm({ queue: (e.currentTarget as HTMLSelectElement).value })}
            >
              {queues.map((p) => (
                <option value={p}>{p}</option>
              ))}
            </select>
            {fieldErr?.field === 'queue' && (
              <span id="qr-queue-error" class="error field-error" role="alert">
                {fieldErr.message}
              </span>
            )}
          </p>
          {input('resource', t('qr.resource'))}
          {input('guaranteed', t('qcol.guaranteed'), t('qr.amountHelp'))}
          {input('borrow_limit', t('qr.borrowLimit'))}
          {input('lending_limit', t('qr.lendingLimit'))}
          {input('reason', t('qr.reason'))}
          <button type="submit" id="qr-submit" disabled={pending}>
            {t('qr.submit')}
          </button>
        </form>
      )}
    </>
  );
}

// The tokens of the members the caller may see them for, read once when the
// page opens (not on every poll: one request per member). Never a secret.
function Tokens({ owners, when }: { owners: string[]; when: (ms: number | null) => string }) {
  const ctx = useConsole();
  const { t, lang, api } = ctx;
  const [tokens, setTokens] = useState<TokenInfo[] | null>(null);
  const key = owners.join('\n');
  useEffect(() => {
    let alive = true;
    void Promise.all(owners.map((o) => guard(ctx, () => api.tokens(o)))).then((rs) => {
      if (!alive) return;
      const list = rs.flatMap((r) => (r instanceof ApiError ? [] : r.tokens));
      list.sort((a, b) => b.created_ms - a.created_ms);
      setTokens(list);
    });
    return () => {
      alive = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);
  const now = Date.now();
  return (
    <>
      <h2 id="tokens-h">{t('tenant.tokens')}</h2>
      {tokens === null ? (
        <p role="status">{t('common.loading')}</p>
      ) : tokens.length === 0 ? (
        <p id="tokens-empty">{t('tenant.noTokens')}</p>
      ) : (
        <table id="tenant-tokens" aria-labelledby="tokens-h">
          <thead>
            <tr>
              <th scope="col">{t('mcol.identity')}</th>
              <th scope="col">{t('tcol.id')}</th>
              <th scope="col">{t('tcol.description')}</th>
              <th scope="col">{t('tcol.created')}</th>
              <th scope="col">{t('tcol.expires')}</th>
              <th scope="col">{t('col.state')}</th>
            </tr>
          </thead>
          <tbody>
            {tokens.map((k) => (
              <tr key={k.id} data-token={k.id}>
                <td>{k.identity}</td>
                <td>
                  <code>{k.id}</code>
                </td>
                <td>{k.description || t('common.none')}</td>
                <td>
                  {when(k.created_ms)} ({k.created_by})
                </td>
                <td>{k.expires_ms ? when(k.expires_ms) : t('tenant.never')}</td>
                <td class="state">{labelOf(lang, 'token', tokenState(k, now))}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
