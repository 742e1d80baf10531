// One node (/ui/fleet/NODE): its state, connection and cordon, its GPUs
// with health, cordon and holder, and its last events, as
// GET /v1/nodes/{node} answers (`berth node NODE`). A platform admin also
// gets Cordon, Drain (confirmed, with the reason), Uncordon and a cordon
// per GPU; the server decides anyway, and its refusal is shown with its
// message. Asked again on the node's own events and on job events that may
// move its GPUs (a burst is one request, at most one a second), every
// LIVE_POLL_MS while live for what sends no event (its heartbeat, other
// tenants' jobs), and every POLL_MS while the event stream is down.

import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, canCordon, type NodeAction, type NodeDetail } from '../api';
import { guard, Link, useConsole } from '../app';
import { gpuState, holderIds, isFree, jobMovesGpus } from '../fleet';
import { labelOf } from '../i18n';
import { cordonText, holderText } from './fleet';
import { LiveStatus, useLiveRefresh } from './live-status';

export const POLL_MS = 5000;
export const LIVE_POLL_MS = 60000;

// 85899345920 -> "80 GiB"; one decimal when not whole.
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${Number.isInteger(v) ? v : v.toFixed(1)} ${units[u]}`;
}

export function NodePage({ name }: { name: string }) {
  const ctx = useConsole();
  const { t, lang, api, caller } = ctx;
  const [node, setNode] = useState<NodeDetail | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [notice, setNotice] = useState<{ text: string; failed: boolean } | null>(null);
  // The reason field is read when a button is pressed, not mirrored in state.
  const reasonRef = useRef<HTMLInputElement>(null);
  const [confirming, setConfirming] = useState(false);
  const [pending, setPending] = useState(false);
  const [tick, setTick] = useState(0);

  const loadRef = useRef<() => void>(() => undefined);
  useEffect(() => {
    let alive = true;
    let seq = 0;
    const load = async () => {
      const mine = ++seq;
      const r = await guard(ctx, () => api.node(name));
      if (!alive || mine !== seq) return;
      if (r instanceof ApiError) return setError(r);
      setError(null);
      setNode(r);
    };
    loadRef.current = () => void load();
    void load();
    return () => {
      alive = false;
      loadRef.current = () => undefined;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [name, tick]);

  const holders = useMemo(() => holderIds(node?.gpus ?? []), [node]);
  const seen = useRef(new Map<number, string>());
  const live = useLiveRefresh(
    {
      topics: ['node', 'job'],
      pollMs: POLL_MS,
      livePollMs: LIVE_POLL_MS,
      active: error?.status !== 404,
      minIntervalMs: 1000,
      match: (e) =>
        e.topic === 'node' ? e.data.node === name : e.topic === 'job' && jobMovesGpus(e.data, holders, seen.current),
    },
    () => loadRef.current(),
  );

  if (error && error.status === 404) {
    return (
      <section>
        <h1>{t('node.title', { name })}</h1>
        <p role="alert">{t('node.notFound', { name })}</p>
        <Link href="/ui/fleet">{t('node.back')}</Link>
      </section>
    );
  }
  if (!node) {
    return error ? (
      <p class="error" role="alert">
        {t('common.error', { message: error.message })}
      </p>
    ) : (
      <p role="status">{t('common.loading')}</p>
    );
  }

  const when = (ms: number | null | undefined) =>
    ms ? new Date(ms).toLocaleString(lang === 'zh' ? 'zh-CN' : 'en-GB') : t('common.none');
  const admin = canCordon(caller);
  const free = node.gpus.filter(isFree).length;

  const act = async (action: NodeAction, gpu?: number) => {
    setConfirming(false);
    setPending(true);
    const r = await guard(ctx, () => api.nodeAction(name, action, reasonRef.current?.value ?? '', gpu));
    setPending(false);
    if (r instanceof ApiError) {
      setNotice({ text: t('node.actionFailed', { message: r.message }), failed: true });
    } else {
      const text =
        gpu !== undefined
          ? t(action === 'uncordon' ? 'node.didGpuUncordon' : 'node.didGpuCordon', { index: gpu })
          : action === 'uncordon'
            ? t((r as { uncordoned?: boolean }).uncordoned === false ? 'node.didNothing' : 'node.didUncordon', { name })
            : t(action === 'drain' ? 'node.didDrain' : 'node.didCordon', { name });
      setNotice({ text, failed: false });
      if (action !== 'uncordon' && reasonRef.current) reasonRef.current.value = '';
    }
    setTick((n) => n + 1);
  };

  return (
    <section aria-labelledby="node-title">
      <p>
        <Link href="/ui/fleet">{t('node.back')}</Link>
      </p>
      <h1 id="node-title">{t('node.title', { name: node.name })}</h1>
      <p class="live-line">
        <LiveStatus state={live} pollMs={POLL_MS} />
      </p>
      <h2>{t('node.summary')}</h2>
      <dl class="summary">
        <dt>{t('col.state')}</dt>
        <dd id="node-state" class={`ns-${node.state}`}>
          {labelOf(lang, 'nodeState', node.state)}
        </dd>
        <dt>{t('node.cordon')}</dt>
        <dd id="node-cordon">{node.cordon ? cordonText(t, node.cordon) : t('common.none')}</dd>
        <dt>{t('node.connection')}</dt>
        <dd>{node.connected ? t('node.connected') : t('node.disconnected')}</dd>
        <dt>{t('node.heartbeat')}</dt>
        <dd>{when(node.last_heartbeat_ms)}</dd>
        <dt>{t('node.stateSince')}</dt>
        <dd>{when(node.state_changed_ms)}</dd>
        <dt>{t('node.address')}</dt>
        <dd>{node.address || t('common.none')}</dd>
        <dt>{t('node.hostname')}</dt>
        <dd>{node.hostname || t('common.none')}</dd>
        <dt>{t('node.free')}</dt>
        <dd id="node-free">{t('node.freeOf', { free, total: node.gpus.length })}</dd>
        <dt>{t('fleet.model')}</dt>
        <dd>{node.models.join(', ') || t('common.none')}</dd>
        <dt>{t('node.provider')}</dt>
        <dd>{node.gpu_provider || t('common.none')}</dd>
      </dl>
      {notice && (
        <p id="node-notice" class={notice.failed ? 'error' : ''} role={notice.failed ? 'alert' : 'status'}>
          {notice.text}
        </p>
      )}
      {admin && (
        <div class="node-actions" role="group" aria-labelledby="actions-title">
          <h2 id="actions-title">{t('node.actions')}</h2>
          <label>
            {t('node.reason')}{' '}
            <input
              id="cordon-reason"
              ref={reasonRef}
              maxLength={1024}
            />
          </label>{' '}
          {node.cordon?.kind !== 'cordon' && node.cordon?.kind !== 'drain' && (
            <button type="button" id="node-cordon-btn" disabled={pending} onClick={() => act('cordon')}>
              {t('node.cordonBtn')}
            </button>
          )}{' '}
          {node.cordon?.kind !== 'drain' && (
            <button type="button" class="danger" id="node-drain-btn" disabled={pending} onClick={() => setConfirming(true)}>
              {t('node.drainBtn')}
            </button>
          )}{' '}
          {node.cordon && (
            <button type="button" id="node-uncordon-btn" disabled={pending} onClick={() => act('uncordon')}>
              {t('node.uncordonBtn')}
            </button>
          )}
          {confirming && (
            <div class="confirm" role="group" aria-labelledby="drain-question">
              <p id="drain-question">{t('node.drainConfirm', { name: node.name })}</p>
              <button type="button" class="danger" id="drain-yes" disabled={pending} onClick={() => act('drain')}>
                {t('node.drainYes')}
              </button>{' '}
              <button type="button" id="drain-no" onClick={() => setConfirming(false)}>
                {t('node.drainNo')}
              </button>
            </div>
          )}
        </div>
      )}
      <h2>{t('node.gpus')}</h2>
      <table class="jobs" id="node-gpus">
        <thead>
          <tr>
            <th scope="col">{t('gcol.index')}</th>
            <th scope="col">{t('gcol.uuid')}</th>
            <th scope="col">{t('fleet.model')}</th>
            <th scope="col">{t('gcol.memory')}</th>
            <th scope="col">{t('gcol.health')}</th>
            <th scope="col">{t('fleet.state')}</th>
            <th scope="col">{t('node.cordon')}</th>
            <th scope="col">{t('gcol.holder')}</th>
            {admin && <th scope="col">{t('gcol.actions')}</th>}
          </tr>
        </thead>
        <tbody>
          {node.gpus.map((g) => {
            const state = gpuState(g);
            const holders = g.job ? [g.job] : (g.sharing?.holders ?? []);
            return (
              <tr key={g.index} data-gpu={g.index}>
                <td>{g.index}</td>
                <td>
                  <code>{g.uuid}</code>
                </td>
                <td>{g.model}</td>
                <td>{formatBytes(g.memory_bytes)}</td>
                <td class={g.health === 'healthy' ? '' : 'error'}>
                  {labelOf(lang, 'health', g.health)}
                  {g.health_detail ? ` (${g.health_detail})` : ''}
                </td>
                <td class="gpu-state">
                  <span class={`gpu g-${state}`} aria-hidden="true" /> {labelOf(lang, 'gpu', state)}
                </td>
                <td class="gpu-cordon">{g.cordon ? cordonText(t, g.cordon) : t('common.none')}</td>
                <td class="holder">
                  {holders.length === 0
                    ? t('common.none')
                    : holders.map((h, i) => (
                        <>
                          {i > 0 && ', '}
                          {h.id !== null && !h.other_tenant ? (
                            <Link href={`/ui/jobs/${h.id}`}>{holderText(t, h)}</Link>
                          ) : (
                            holderText(t, h)
                          )}
                        </>
                      ))}
                </td>
                {admin && (
                  <td>
                    {/* The node's own cordon covers its GPUs: lift that one first. */}
                    {!g.cordon ? (
                      <button
                        type="button"
                        class="small"
                        disabled={pending}
                        data-action="gpu-cordon"
                        onClick={() => act('cordon', g.index)}
                      >
                        {t('node.gpuCordon', { index: g.index })}
                      </button>
                    ) : !node.cordon ? (
                      <button
                        type="button"
                        class="small"
                        disabled={pending}
                        data-action="gpu-uncordon"
                        onClick={() => act('uncordon', g.index)}
                      >
                        {t('node.gpuUncordon', { index: g.index })}
                      </button>
                    ) : (
                      t('common.none')
                    )}
                  </td>
                )}
              </tr>
            );
          })}
        </tbody>
      </table>
      <h2>{t('node.events')}</h2>
      {node.events.length ? (
        <table class="jobs" id="node-events">
          <thead>
            <tr>
              <th scope="col">{t('node.eventTime')}</th>
              <th scope="col">{t('node.eventName')}</th>
              <th scope="col">{t('node.eventMessage')}</th>
            </tr>
          </thead>
          <tbody>
            {/* Newest first: the API sends the last 100, oldest first. */}
            {[...node.events].reverse().map((e) => (
              <tr>
                <td>
                  <time dateTime={new Date(e.time_ms).toISOString()}>{when(e.time_ms)}</time>
                </td>
                <td>
                  <strong>{e.event}</strong>
                </td>
                <td lang="en">{e.message}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p>{t('node.noEvents')}</p>
      )}
    </section>
  );
}
