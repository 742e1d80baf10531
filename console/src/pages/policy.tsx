// The policy (/ui/policy): its versions, newest first, each openable
// (/ui/policy/versions/N: text, author, time, comment), the diff of any two
// (/ui/policy/diff?from=A&to=B), and the changes Berth lets the caller make:
// a platform admin edits the whole policy (Preview replays the recent jobs
// under it, Apply makes it the next version) and rolls back to a version; a
// tenant-admin changes the GPU guarantee and borrow limit of the queues
// below its tenants' own queues, previewing the diff first. Every change
// asks for confirmation; the server decides each one again.

import { useEffect, useRef, useState } from 'preact/hooks';
import {
  ApiError,
  type PolicyChanges,
  type PolicyDiff,
  type PolicyPreview,
  type PolicyVersionFull,
  type PolicyVersionInfo,
  type PolicyVersions,
} from '../api';
import { type Ctx, guard, Link, useConsole } from '../app';
import { labelOf } from '../i18n';
import {
  anyChange,
  canApplyAny,
  diffHref,
  diffRows,
  editableQueues,
  errorLine,
  figure,
  newestFirst,
  parseDiffSearch,
  PREVIEW_METRICS,
  previewRows,
  queueEditorTenants,
  type QueueQuotaForm,
  quotaAmount,
  quotaFormOf,
  setQueueGpuQuota,
  settingValue,
  signed,
} from '../policy';

function whenOf(ctx: Ctx) {
  return (ms: number | null | undefined) =>
    ms ? new Date(ms).toLocaleString(ctx.lang === 'zh' ? 'zh-CN' : 'en-GB') : ctx.t('common.none');
}

// A refusal as the page shows it: the message, the field it names and the
// line of the text that field is on.
interface Refusal {
  message: string;
  field: string;
  line: number | null;
}
function refusalOf(err: ApiError, text: string): Refusal {
  return { message: err.message, field: err.field, line: errorLine(text, err) };
}

function RefusalNote({ id, refusal }: { id: string; refusal: Refusal }) {
  const { t } = useConsole();
  return (
    <div id={id} class="error field-error" role="alert">
      <p>{t('editor.refused', { message: refusal.message })}</p>
      {refusal.field && <p class="refused-field">{t('editor.field', { field: refusal.field })}</p>}
      {refusal.line !== null && <p class="refused-line">{t('editor.line', { line: refusal.line })}</p>}
    </div>
  );
}

function ErrorLine({ error }: { error: ApiError }) {
  const { t } = useConsole();
  return (
    <p class="error" role="alert">
      {t('common.error', { message: error.message })}
    </p>
  );
}

// /ui/policy
export function PolicyPage() {
  const ctx = useConsole();
  const { t, api, caller } = ctx;
  const [versions, setVersions] = useState<PolicyVersions | null>(null);
  const [active, setActive] = useState<PolicyVersionFull | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [tick, setTick] = useState(0);
  const admin = canApplyAny(caller);
  const tenantAdminOf = queueEditorTenants(caller);

  useEffect(() => {
    let alive = true;
    void guard(ctx, () => Promise.all([api.policyVersions(), api.activePolicy()])).then((r) => {
      if (!alive) return;
      if (r instanceof ApiError) return setError(r);
      setError(null);
      setVersions(r[0]);
      setActive(r[1]);
    });
    return () => {
      alive = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [tick]);

  if (!versions || !active) {
    return (
      <section>
        <h1>{t('policy.title')}</h1>
        {error ? <ErrorLine error={error} /> : <p role="status">{t('common.loading')}</p>}
      </section>
    );
  }
  const when = whenOf(ctx);
  const list = newestFirst(versions.versions);
  const queues = editableQueues(caller, active.policy.queues);
  return (
    <section>
      <h1>{t('policy.title')}</h1>
      <p id="policy-active">{t('policy.active', { version: active.version, by: active.applied_by, when: when(active.applied_at_ms) })}</p>
      {error && <ErrorLine error={error} />}

      <h2 id="versions-h">{t('policy.versions')}</h2>
      <p class="hint">{t('policy.versionsHelp')}</p>
      <VersionsTable versions={list} />
      <ComparePicker versions={list} pair={{ from: active.version > 1 ? active.version - 1 : null, to: active.version }} />

      {admin && <PolicyEditor active={active} reload={() => setTick((n) => n + 1)} />}
      {!admin && tenantAdminOf.length > 0 && (
        <QueueEditor active={active} tenants={tenantAdminOf} queues={queues} reload={() => setTick((n) => n + 1)} />
      )}
    </section>
  );
}

function VersionsTable({ versions }: { versions: PolicyVersionInfo[] }) {
  const ctx = useConsole();
  const { t } = ctx;
  const when = whenOf(ctx);
  return (
    <table id="policy-versions" class="jobs" aria-labelledby="versions-h">
      <thead>
        <tr>
          <th scope="col">{t('vcol.version')}</th>
          <th scope="col">{t('vcol.applied')}</th>
          <th scope="col">{t('vcol.by')}</th>
          <th scope="col">{t('vcol.comment')}</th>
          <th scope="col">{t('vcol.note')}</th>
        </tr>
      </thead>
      <tbody>
        {versions.map((v) => (
          <tr key={v.version} data-version={v.version} class={v.active ? 'active' : ''}>
            <th scope="row">
              <Link href={`/ui/policy/versions/${v.version}`}>{String(v.version)}</Link>
            </th>
            <td>{when(v.applied_at_ms)}</td>
            <td class="by">{v.applied_by}</td>
            <td class="comment">{v.comment || t('common.none')}</td>
            <td class="note">
              {[v.active ? t('policy.activeBadge') : '', v.restores ? t('policy.restores', { version: v.restores }) : '']
                .filter(Boolean)
                .join('; ') || t('common.none')}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

// Two versions to compare; showing the diff is a navigation, so the diff is
// a link. The choice is read when the button is pressed: kept in a ref.
function ComparePicker({ versions, pair }: { versions: PolicyVersionInfo[]; pair: { from: number | null; to: number | null } }) {
  const { t, navigate } = useConsole();
  const chosen = useRef({
    from: String(pair.from ?? versions[versions.length - 1]?.version ?? ''),
    to: String(pair.to ?? versions[0]?.version ?? ''),
  });
  const [shown, setShown] = useState(chosen.current);
  const choose = (patch: Partial<typeof chosen.current>) => {
    chosen.current = { ...chosen.current, ...patch };
    setShown(chosen.current);
  };
  const select = (k: 'from' | 'to', label: string) => (
    <p>
      <label for={`diff-${k}`}>{label}</label>{' '}
      <select id={`diff-${k}`} value={shown[k]} onChange={(e) => choose({ [k]: (e.currentTarget as HTMLSelectElement).value })}>
        {versions.map((v) => (
          <option value={String(v.version)}>{String(v.version)}</option>
        ))}
      </select>
    </p>
  );
  return (
    <form
      id="diff-form"
      class="filters"
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        navigate(diffHref({ from: Number(chosen.current.from), to: Number(chosen.current.to) }));
      }}
    >
      <h2 class="inline">{t('policy.compare')}</h2>
      {select('from', t('policy.from'))}
      {select('to', t('policy.to'))}
      <button type="submit" id="diff-show">
        {t('policy.showDiff')}
      </button>
    </form>
  );
}

// /ui/policy/versions/N
export function PolicyVersionPage({ version }: { version: number }) {
  const ctx = useConsole();
  const { t, api, caller } = ctx;
  const [v, setV] = useState<PolicyVersionFull | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let alive = true;
    void guard(ctx, () => api.policyVersion(version)).then((r) => {
      if (!alive) return;
      if (r instanceof ApiError) return setError(r);
      setError(null);
      setV(r);
    });
    return () => {
      alive = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [version, tick]);

  const title = <h1>{t('version.title', { version })}</h1>;
  if (error && (error.status === 404 || error.status === 400)) {
    return (
      <section>
        {title}
        <p id="version-missing" role="alert">
          {t('version.notFound', { version })}
        </p>
        <Link href="/ui/policy">{t('version.back')}</Link>
      </section>
    );
  }
  if (!v) {
    return <section>{title}{error ? <ErrorLine error={error} /> : <p role="status">{t('common.loading')}</p>}</section>;
  }
  const when = whenOf(ctx);
  return (
    <section>
      {title}
      <p>
        <Link href="/ui/policy">{t('version.back')}</Link>
      </p>
      <dl class="summary" id="version-summary">
        <dt>{t('version.state')}</dt>
        <dd id="version-state">{v.active ? t('version.activeNow') : t('version.notActive')}</dd>
        <dt>{t('vcol.applied')}</dt>
        <dd id="version-applied">{when(v.applied_at_ms)}</dd>
        <dt>{t('vcol.by')}</dt>
        <dd id="version-by">{v.applied_by}</dd>
        <dt>{t('vcol.comment')}</dt>
        <dd id="version-comment">{v.comment || t('common.none')}</dd>
      </dl>
      {v.restores !== null && (
        <p id="version-rollback-of">{t('version.rollbackOf', { restores: v.restores, from: v.rolled_back_from ?? '?' })}</p>
      )}
      {v.version > 1 && (
        <p>
          <Link href={diffHref({ from: v.version - 1, to: v.version })}>{t('version.diffPrev', { prev: v.version - 1 })}</Link>
        </p>
      )}
      {canApplyAny(caller) && !v.active && <Rollback version={v.version} reload={() => setTick((n) => n + 1)} />}
      <h2 id="version-text-h">{t('version.text')}</h2>
      <pre id="version-yaml" class="yaml" tabIndex={0} aria-labelledby="version-text-h">
        {v.yaml}
      </pre>
    </section>
  );
}

function Rollback({ version, reload }: { version: number; reload: () => void }) {
  const ctx = useConsole();
  const { t, api } = ctx;
  const [confirming, setConfirming] = useState(false);
  const commentRef = useRef('');
  const [comment, setComment] = useState('');
  const [pending, setPending] = useState(false);
  const [done, setDone] = useState<{ version: number; restores: number } | null>(null);
  const [failed, setFailed] = useState<string>('');
  const roll = async () => {
    setPending(true);
    const r = await guard(ctx, () => api.rollbackPolicy(version, commentRef.current));
    setPending(false);
    setConfirming(false);
    if (r instanceof ApiError) return setFailed(t('editor.refused', { message: r.message }));
    setFailed('');
    setDone(r);
    reload();
  };
  return (
    <div class="node-actions">
      {done && (
        <p id="rollback-notice" role="status">
          {t('version.rolledBack', { version: done.version, restores: done.restores })}{' '}
          <Link href={`/ui/policy/versions/${done.version}`}>{t('version.openNew', { version: done.version })}</Link>
        </p>
      )}
      {failed && (
        <p id="rollback-error" class="error" role="alert">
          {failed}
        </p>
      )}
      {confirming ? (
        <div class="confirm" role="group" aria-labelledby="rollback-question">
          <p id="rollback-question">{t('version.rollbackConfirm', { version })}</p>
          <p>
            <label for="rollback-comment">{t('policy.comment')}</label>{' '}
            <input
              id="rollback-comment"
              value={comment}
              onInput={(e) => {
                commentRef.current = (e.currentTarget as HTMLInputElement).value;
                setComment(commentRef.current);
              }}
            />
          </p>
          <button type="button" class="danger" id="rollback-yes" disabled={pending} onClick={roll}>
            {t('version.rollbackYes')}
          </button>{' '}
          <button type="button" id="rollback-no" onClick={() => setConfirming(false)}>
            {t('version.rollbackNo')}
          </button>
        </div>
      ) : (
        <button type="button" class="danger" id="rollback" onClick={() => setConfirming(true)}>
          {t('version.rollback')}
        </button>
      )}
    </div>
  );
}

// /ui/policy/diff?from=A&to=B
export function PolicyDiffPage({ search }: { search: string }) {
  const ctx = useConsole();
  const { t, api } = ctx;
  const pair = parseDiffSearch(search);
  const [diff, setDiff] = useState<PolicyDiff | null>(null);
  const [versions, setVersions] = useState<PolicyVersionInfo[] | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  useEffect(() => {
    let alive = true;
    setDiff(null);
    void guard(ctx, () =>
      Promise.all([api.policyDiff(pair.from ?? undefined, pair.to ?? undefined), api.policyVersions()]),
    ).then((r) => {
      if (!alive) return;
      if (r instanceof ApiError) return setError(r);
      setError(null);
      setDiff(r[0]);
      setVersions(newestFirst(r[1].versions));
    });
    return () => {
      alive = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [search]);
  if (!diff || !versions) {
    return (
      <section>
        <h1>{t('policy.title')}</h1>
        {error ? <ErrorLine error={error} /> : <p role="status">{t('common.loading')}</p>}
        <Link href="/ui/policy">{t('version.back')}</Link>
      </section>
    );
  }
  return (
    <section>
      <h1>{t('diff.title', { from: diff.from, to: diff.to })}</h1>
      <p>
        <Link href="/ui/policy">{t('version.back')}</Link>
      </p>
      <ComparePicker key={search} versions={versions} pair={{ from: diff.from, to: diff.to }} />
      <DiffView diff={diff} />
    </section>
  );
}

// A diff's summary and its lines.
function DiffView({ diff, idPrefix = 'diff', level = 2 }: { diff: PolicyDiff; idPrefix?: string; level?: 2 | 3 }) {
  const { t } = useConsole();
  const rows = diffRows(diff.diff);
  const H = level === 2 ? 'h2' : 'h3';
  return (
    <div id={`${idPrefix}-view`}>
      {diff.dry_run && <p class="hint">{t('diff.dryRun', { from: diff.from, to: diff.to })}</p>}
      <H id={`${idPrefix}-summary-h`}>{t('diff.summary')}</H>
      <ChangeSummary id={`${idPrefix}-summary`} changes={diff.changes} />
      {rows.length === 0 ? (
        <p id={`${idPrefix}-same`}>{t('diff.same')}</p>
      ) : (
        <>
          <H id={`${idPrefix}-lines-h`}>{t('diff.lines')}</H>
          <table id={`${idPrefix}-lines`} class="diff" aria-labelledby={`${idPrefix}-lines-h`}>
            <thead>
              <tr>
                <th scope="col">{t('diff.colOld')}</th>
                <th scope="col">{t('diff.colNew')}</th>
                <th scope="col">{t('diff.colText')}</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r, i) => (
                <tr key={i} class={`d-${r.kind}`} data-kind={r.kind}>
                  <td class="ln">{r.old ?? ''}</td>
                  <td class="ln">{r.new ?? ''}</td>
                  <td>
                    <code>
                      {r.kind === 'add' && <span class="vh">{t('diff.add')}: </span>}
                      {r.kind === 'del' && <span class="vh">{t('diff.del')}: </span>}
                      {r.kind === 'add' ? '+ ' : r.kind === 'del' ? '- ' : r.kind === 'ctx' ? '  ' : ''}
                      {r.text}
                    </code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </div>
  );
}

function ChangeSummary({ id, changes }: { id: string; changes: PolicyChanges }) {
  const { t, lang } = useConsole();
  if (!anyChange(changes)) return <p id={id}>{t('qe.noChange')}</p>;
  const limit = (s: string | null) => s ?? t('tenant.noLimit');
  const value = (v: unknown) => settingValue(v) || t('diff.nothing');
  const items: { key: string; text: string }[] = [];
  if (changes.queues_added.length) items.push({ key: 'added', text: t('diff.added', { list: changes.queues_added.join(', ') }) });
  if (changes.queues_removed.length) items.push({ key: 'removed', text: t('diff.removed', { list: changes.queues_removed.join(', ') }) });
  for (const c of changes.quota_changes) {
    items.push({
      key: `quota:${c.queue}:${c.resource}:${c.field}`,
      text: t('diff.quota', {
        queue: c.queue,
        resource: c.resource,
        field: labelOf(lang, 'qfield', c.field),
        from: limit(quotaAmount(c.resource, c.field, c.from)),
        to: limit(quotaAmount(c.resource, c.field, c.to)),
      }),
    });
  }
  for (const c of changes.queue_changes) {
    items.push({ key: `queue:${c.queue}:${c.field}`, text: t('diff.queue', { queue: c.queue, field: c.field, from: value(c.from), to: value(c.to) }) });
  }
  if (changes.settings_changed.length) items.push({ key: 'settings', text: t('diff.settings', { list: changes.settings_changed.join(', ') }) });
  for (const c of changes.tenant_changes ?? []) {
    items.push({ key: `tenant:${c.tenant}:${c.field}`, text: t('diff.tenant', { tenant: c.tenant, field: c.field }) });
  }
  return (
    <ul id={id}>
      {items.map((i) => (
        <li key={i.key} data-change={i.key}>
          {i.text}
        </li>
      ))}
    </ul>
  );
}

// A preview's figures: a row per tenant and one for all, each cell the
// active policy's figure, the proposed one's and the change.
function PreviewView({ preview }: { preview: PolicyPreview }) {
  const ctx = useConsole();
  const { t } = ctx;
  const when = whenOf(ctx);
  const rows = previewRows(preview);
  return (
    <div id="preview">
      <h3 id="preview-h">{t('preview.title', { window: preview.window.duration })}</h3>
      {preview.message ? (
        <p id="preview-message" role="status">
          {t('preview.nothing')} {preview.message}
        </p>
      ) : (
        <>
          <p id="preview-window">
            {t('preview.window', {
              since: when(preview.window.since_ms),
              until: when(preview.window.until_ms),
              jobs: preview.jobs,
              nodes: preview.nodes ?? 0,
              gpus: preview.cluster_gpus ?? 0,
            })}
          </p>
          <p class="hint">{t('preview.legend')}</p>
          <table id="policy-preview" class="jobs" aria-labelledby="preview-h">
            <thead>
              <tr>
                <th scope="col">{t('pcol.tenant')}</th>
                {PREVIEW_METRICS.map((m) => (
                  <th scope="col">{t(`pcol.${m}`)}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r.tenant ?? ''} data-tenant={r.tenant ?? '*'}>
                  <th scope="row">{r.tenant ?? t('preview.all')}</th>
                  {r.cells.map((c) => {
                    const cur = figure(c.metric, c.current);
                    const pro = figure(c.metric, c.proposed);
                    const chg = signed(c.metric, c.change);
                    return (
                      <td data-metric={c.metric} data-current={String(c.current)} data-proposed={String(c.proposed)}>
                        {cur === null && pro === null ? (
                          t('preview.unpriced')
                        ) : (
                          <>
                            <span class="cur">{cur ?? t('preview.unpriced')}</span> →{' '}
                            <span class="pro">{pro ?? t('preview.unpriced')}</span>
                            {chg !== null && <span class="chg"> ({chg})</span>}
                          </>
                        )}
                      </td>
                    );
                  })}
                </tr>
              ))}
            </tbody>
          </table>
          {preview.never_started && (
            <p id="preview-never">{t('preview.neverStarted', preview.never_started)}</p>
          )}
          {preview.unpriced_models && preview.unpriced_models.length > 0 && (
            <p>{t('preview.unpricedModels', { models: preview.unpriced_models.join(', ') })}</p>
          )}
        </>
      )}
    </div>
  );
}

// A platform admin's editor: the active policy's text, Preview (the diff
// of a dry run, and the replay of the window) and Apply (after a
// confirmation, based on the version read, so a change that landed since is
// refused rather than overwritten).
function PolicyEditor({ active, reload }: { active: PolicyVersionFull; reload: () => void }) {
  const ctx = useConsole();
  const { t, api } = ctx;
  // Read when a button is pressed: kept in refs as typed.
  const text = useRef(active.yaml);
  const [yaml, setYaml] = useState(active.yaml);
  const fields = useRef({ window: '7d', prices: '', comment: '' });
  const [form, setForm] = useState(fields.current);
  const [base, setBase] = useState(active.version);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const [diff, setDiff] = useState<PolicyDiff | null>(null);
  const [preview, setPreview] = useState<PolicyPreview | null>(null);
  const [previewError, setPreviewError] = useState<ApiError | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [notice, setNotice] = useState('');
  const [pending, setPending] = useState(false);
  const set = (patch: Partial<typeof fields.current>) => {
    fields.current = { ...fields.current, ...patch };
    setForm(fields.current);
  };

  const doPreview = async () => {
    const sent = text.current;
    setPending(true);
    setNotice('');
    const d = await guard(ctx, () => api.applyPolicy(sent, { dryRun: true }));
    if (d instanceof ApiError) {
      setPending(false);
      setDiff(null);
      setPreview(null);
      return setRefusal(refusalOf(d, sent));
    }
    setRefusal(null);
    setDiff(d);
    const p = await guard(ctx, () => api.previewPolicy(sent, { window: fields.current.window, prices: fields.current.prices }));
    setPending(false);
    if (p instanceof ApiError) {
      setPreview(null);
      return setPreviewError(p);
    }
    setPreviewError(null);
    setPreview(p);
  };

  const apply = async () => {
    const sent = text.current;
    setPending(true);
    const r = await guard(ctx, () => api.applyPolicy(sent, { comment: fields.current.comment, base }));
    setPending(false);
    setConfirming(false);
    if (r instanceof ApiError) {
      setNotice('');
      return setRefusal(refusalOf(r, sent));
    }
    setRefusal(null);
    setDiff(null);
    setPreview(null);
    if (r.version !== undefined) setBase(r.version);
    set({ comment: '' });
    setNotice(t('editor.applied', { version: r.version ?? '' }));
    reload();
  };

  return (
    <div class="editor">
      <h2 id="editor-h">{t('editor.title')}</h2>
      <p class="hint" id="editor-help">
        {t('editor.help', { version: base })}
      </p>
      {notice && (
        <p id="editor-notice" role="status">
          {notice}
        </p>
      )}
      <p>
        <label for="policy-editor">{t('editor.label')}</label>
      </p>
      <textarea
        id="policy-editor"
        rows={Math.min(30, Math.max(10, yaml.split('\n').length + 1))}
        spellcheck={false}
        value={yaml}
        aria-invalid={refusal ? 'true' : undefined}
        aria-describedby={refusal ? 'editor-error' : 'editor-help'}
        onInput={(e) => {
          text.current = (e.currentTarget as HTMLTextAreaElement).value;
          setYaml(text.current);
        }}
      />
      {refusal && <RefusalNote id="editor-error" refusal={refusal} />}
      <div class="filters">
        <p>
          <label for="editor-window">{t('editor.window')}</label>{' '}
          <input id="editor-window" class="short" value={form.window} onInput={(e) => set({ window: (e.currentTarget as HTMLInputElement).value })} />
        </p>
        <p>
          <label for="editor-prices">{t('editor.prices')}</label>{' '}
          <input
            id="editor-prices"
            value={form.prices}
            aria-describedby="editor-prices-help"
            onInput={(e) => set({ prices: (e.currentTarget as HTMLInputElement).value })}
          />{' '}
          <span id="editor-prices-help" class="hint">
            {t('editor.pricesHelp')}
          </span>
        </p>
        <p>
          <label for="editor-comment">{t('policy.comment')}</label>{' '}
          <input id="editor-comment" value={form.comment} onInput={(e) => set({ comment: (e.currentTarget as HTMLInputElement).value })} />
        </p>
      </div>
      <p>
        <button type="button" id="editor-preview" disabled={pending} onClick={doPreview}>
          {t('editor.preview')}
        </button>{' '}
        <button type="button" id="editor-apply" class="danger" disabled={pending || confirming} onClick={() => setConfirming(true)}>
          {t('editor.apply')}
        </button>{' '}
        <button
          type="button"
          id="editor-reset"
          disabled={pending}
          onClick={() => {
            text.current = active.yaml;
            setYaml(active.yaml);
            setBase(active.version);
            setRefusal(null);
            setDiff(null);
            setPreview(null);
          }}
        >
          {t('editor.reset')}
        </button>
      </p>
      {confirming && (
        <div class="confirm" role="group" aria-labelledby="editor-question">
          <p id="editor-question">{t('editor.applyConfirm')}</p>
          <button type="button" class="danger" id="editor-apply-yes" disabled={pending} onClick={apply}>
            {t('editor.applyYes')}
          </button>{' '}
          <button type="button" id="editor-apply-no" onClick={() => setConfirming(false)}>
            {t('editor.applyNo')}
          </button>
        </div>
      )}
      {previewError && <ErrorLine error={previewError} />}
      {preview && <PreviewView preview={preview} />}
      {diff && <DiffView diff={diff} idPrefix="proposed" level={3} />}
    </div>
  );
}

// A tenant-admin's form: a queue below its tenants' own, its GPU guarantee
// and borrow limit; Preview shows the dry run's diff, and only then Apply
// (confirmed) sends that same text.
function QueueEditor({
  active,
  tenants,
  queues,
  reload,
}: {
  active: PolicyVersionFull;
  tenants: string[];
  queues: ReturnType<typeof editableQueues>;
  reload: () => void;
}) {
  const ctx = useConsole();
  const { t, api } = ctx;
  const formRef = useRef<QueueQuotaForm>(queues[0] ? quotaFormOf(queues[0]) : { queue: '', guaranteed: '', borrow_limit: '' });
  const [form, setFormState] = useState(formRef.current);
  const commentRef = useRef('');
  const [comment, setComment] = useState('');
  const [problem, setProblem] = useState<{ field: keyof QueueQuotaForm | ''; message: string } | null>(null);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const [previewed, setPreviewed] = useState<{ yaml: string; diff: PolicyDiff } | null>(null);
  const [confirming, setConfirming] = useState(false);
  const [notice, setNotice] = useState('');
  const [pending, setPending] = useState(false);
  const setForm = (patch: Partial<QueueQuotaForm>) => {
    formRef.current = { ...formRef.current, ...patch };
    setFormState(formRef.current);
    setPreviewed(null);
    setConfirming(false);
  };

  if (queues.length === 0) {
    return (
      <div class="editor">
        <h2>{t('qe.title')}</h2>
        <p id="qe-none">{t('qe.none')}</p>
      </div>
    );
  }

  const doPreview = async (e: Event) => {
    e.preventDefault();
    setNotice('');
    const yaml = setQueueGpuQuota(active.normalized, formRef.current);
    if (typeof yaml !== 'string') {
      setRefusal(null);
      return setProblem({ field: yaml.field, message: t(yaml.problem === 'amount' ? 'qe.badAmount' : 'qe.noQueue') });
    }
    setProblem(null);
    setPending(true);
    const d = await guard(ctx, () => api.applyPolicy(yaml, { dryRun: true }));
    setPending(false);
    if (d instanceof ApiError) return setRefusal(refusalOf(d, yaml));
    setRefusal(null);
    setPreviewed({ yaml, diff: d });
  };

  const apply = async () => {
    if (!previewed) return;
    setPending(true);
    const r = await guard(ctx, () => api.applyPolicy(previewed.yaml, { comment: commentRef.current, base: active.version }));
    setPending(false);
    setConfirming(false);
    if (r instanceof ApiError) return setRefusal(refusalOf(r, previewed.yaml));
    setRefusal(null);
    setPreviewed(null);
    setNotice(t('editor.applied', { version: r.version ?? '' }));
    reload();
  };

  const bad = (k: keyof QueueQuotaForm) => problem?.field === k;
  const amount = (k: 'guaranteed' | 'borrow_limit', id: string, label: string) => (
    <p>
      <label for={id}>{label}</label>{' '}
      <input
        id={id}
        class="short"
        value={form[k]}
        aria-invalid={bad(k) ? 'true' : undefined}
        aria-describedby={bad(k) ? `${id}-error` : undefined}
        onInput={(e) => setForm({ [k]: (e.currentTarget as HTMLInputElement).value })}
      />
      {bad(k) && (
        <span id={`${id}-error`} class="error field-error" role="alert">
          {problem!.message}
        </span>
      )}
    </p>
  );

  return (
    <div class="editor">
      <h2 id="qe-h">{t('qe.title')}</h2>
      <p class="hint">{t('qe.help', { tenants: tenants.join(', ') })}</p>
      {notice && (
        <p id="qe-notice" role="status">
          {notice}
        </p>
      )}
      <form id="qe-form" class="filters" onSubmit={doPreview} noValidate>
        <p>
          <label for="qe-queue">{t('qe.queue')}</label>{' '}
          <select
            id="qe-queue"
            value={form.queue}
            aria-invalid={bad('queue') ? 'true' : undefined}
            aria-describedby={bad('queue') ? 'qe-queue-error' : undefined}
            onChange={(e) => {
              const q = queues.find((x) => x.path === (e.currentTarget as HTMLSelectElement).value);
              if (q) setForm(quotaFormOf(q));
            }}
          >
            {queues.map((q) => (
              <option value={q.path}>{q.path}</option>
            ))}
          </select>
          {bad('queue') && (
            <span id="qe-queue-error" class="error field-error" role="alert">
              {problem!.message}
            </span>
          )}
        </p>
        {amount('guaranteed', 'qe-guaranteed', t('qe.guaranteed'))}
        {amount('borrow_limit', 'qe-borrow', t('qe.borrow'))}
        <p>
          <label for="qe-comment">{t('policy.comment')}</label>{' '}
          <input
            id="qe-comment"
            value={comment}
            onInput={(e) => {
              commentRef.current = (e.currentTarget as HTMLInputElement).value;
              setComment(commentRef.current);
            }}
          />
        </p>
        <button type="submit" id="qe-preview" disabled={pending}>
          {t('qe.preview')}
        </button>
      </form>
      {refusal && <RefusalNote id="qe-error" refusal={refusal} />}
      {previewed && (
        <>
          <h3>{t('qe.changes')}</h3>
          <DiffView diff={previewed.diff} idPrefix="qe-diff" level={3} />
          {confirming ? (
            <div class="confirm" role="group" aria-labelledby="qe-question">
              <p id="qe-question">{t('qe.confirm', { queue: form.queue })}</p>
              <button type="button" class="danger" id="qe-yes" disabled={pending} onClick={apply}>
                {t('editor.applyYes')}
              </button>{' '}
              <button type="button" id="qe-no" onClick={() => setConfirming(false)}>
                {t('editor.applyNo')}
              </button>
            </div>
          ) : (
            <button type="button" class="danger" id="qe-apply" disabled={pending || !anyChange(previewed.diff.changes)} onClick={() => setConfirming(true)}>
              {t('qe.apply')}
            </button>
          )}
        </>
      )}
    </div>
  );
}
