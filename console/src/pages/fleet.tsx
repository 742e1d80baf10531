// The fleet: every node as a row of GPU cells coloured by state, the
// summary line and fragmentation at a glance above them, and filters in the
// URL (/ui/fleet?model=&state=&node=&min_free=). What `berth nodes` and
// `berth gpus` show the caller: a holder from a tenant the caller may not
// read is "another tenant", with no link.
//
// Built for 10,000 GPUs: a cell is a plain <span> (or an <a> when it links
// to a job the caller can read), not a component; clicks on cells are
// handled once on the map; each node row is keyed and re-renders only when
// its own cells changed (NodeRow.shouldComponentUpdate), so a refresh that
// changes one GPU touches one row.
//
// A held GPU with a telemetry sample gets a bar under its cell, as long as
// its utilization (the percentage is in the cell's name), and one that
// berthd finds idle while allocated a hatched mark (named too, counted in
// the summary and on its node's row, and a filter of its own).
//
// Kept current by events: node events, and job events that may move GPUs
// (jobMovesGpus), refetch both lists, at most once per 2 s. Utilization and
// other tenants' jobs send this caller no event, so the map is also asked
// for every LIVE_POLL_MS while live, and every POLL_MS while the stream is
// down. The session's first stream says hello just after the page opens:
// the first fetch waits for it (at most FIRST_FETCH_WAIT_MS), so the hello
// costs no second download of the map (live.ts, SubscribeOptions.fetchedAt).

import { Component, type JSX } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { FleetGpu, FleetNode, GpuHolder } from '../api';
import { guard, Link, useConsole } from '../app';
import {
  fleetParams,
  type FleetFilters,
  fleetView,
  GPU_FILTERS,
  GPU_STATES,
  type GpuFilter,
  type GpuState,
  gpuState,
  holderIds,
  isHeld,
  isIdleAllocated,
  jobMovesGpus,
  mapRows,
  models,
  nodeHref,
  type NodeView,
  parseFleetFilters,
  summarize,
  utilOf,
} from '../fleet';
import { type Key, type Lang, labelOf, translate } from '../i18n';
import { LiveStatus, useLiveRefresh } from './live-status';

export const POLL_MS = 10000;
export const LIVE_POLL_MS = 30000;
export const FIRST_FETCH_WAIT_MS = 1000;

type T = (key: Key, vars?: Record<string, string | number>) => string;

// A holder as `berth gpus` writes it: "12 resnet50/r0", or the API's word
// for a job the caller may not see.
export function holderText(t: T, h: GpuHolder): string {
  if (h.id === null || h.other_tenant) return t('fleet.otherTenant');
  return `${h.id} ${h.name}${h.replica === undefined ? '' : `/r${h.replica}`}`;
}

export function cordonText(t: T, c: NonNullable<FleetGpu['cordon']>): string {
  const text = t(c.kind === 'drain' ? 'cordon.drain' : 'cordon.cordon', { by: c.by, reason: c.reason || t('common.none') });
  return c.automatic ? `${text} ${t('cordon.automatic')}` : text;
}

// Everything a cell says: where it is, what it is, who holds it, why it is
// cordoned or unhealthy. Its title and its accessible name.
export function cellLabel(t: T, lang: Lang, g: FleetGpu, state: GpuState): string {
  const parts = [t('fleet.cell', { node: g.node, index: g.index, model: g.model, state: labelOf(lang, 'gpu', state) })];
  if (g.job) parts.push(t('fleet.cellJob', { job: holderText(t, g.job) }));
  if (g.sharing?.holders?.length) {
    parts.push(t('fleet.cellSlices', { jobs: g.sharing.holders.map((h) => holderText(t, h)).join(', ') }));
  }
  const util = utilOf(g);
  if (util !== null) parts.push(t('fleet.cellUtil', { pct: util }));
  if (isIdleAllocated(g)) parts.push(t('fleet.cellIdle'));
  if (g.health !== 'healthy' && g.health_detail) parts.push(g.health_detail);
  if (g.cordon && state !== 'unhealthy') parts.push(cordonText(t, g.cordon));
  return parts.join(t('fleet.sep'));
}

interface RowProps {
  view: NodeView;
  match: boolean[];
  lang: Lang;
  sig: string;
}

// What a row's rendering depends on, as one string: equal strings, equal rows.
export function rowSig(v: NodeView, match: boolean[], lang: Lang): string {
  let s = `${lang}|${v.node.state}|${v.node.cordon?.kind ?? ''}|${v.free}|${v.idle}|${v.gpus.length}`;
  for (let i = 0; i < v.gpus.length; i++) {
    const g = v.gpus[i];
    const c = g.cordon ? `${g.cordon.kind}${g.cordon.by}${g.cordon.reason}${g.cordon.automatic}` : '';
    const slices = g.sharing?.holders?.map((h) => h.id).join(',') ?? '';
    s += `|${g.index}:${gpuState(g)}:${g.health_detail}:${c}:${g.job?.id ?? (g.job ? 'x' : '')}`;
    s += `:${g.job?.name ?? ''}:${g.job?.replica ?? ''}:${slices}:${match[i] ? 1 : 0}`;
    s += `:${utilOf(g) ?? ''}:${isIdleAllocated(g) ? 1 : 0}`;
  }
  return s;
}

class NodeRow extends Component<RowProps> {
  shouldComponentUpdate(next: RowProps): boolean {
    return next.sig !== this.props.sig;
  }

  render({ view, match, lang }: RowProps) {
    const t: T = (key, vars) => translate(lang, key, vars);
    const { node, gpus, free, idle } = view;
    const cells: JSX.Element[] = [];
    for (let i = 0; i < gpus.length; i++) {
      const g = gpus[i];
      const state = gpuState(g);
      const label = cellLabel(t, lang, g, state);
      let cls = `gpu g-${state}`;
      if (g.cordon && state !== 'cordoned' && state !== 'drained') cls += ' marked';
      if (isIdleAllocated(g)) cls += ' idle';
      const util = isHeld(g) ? utilOf(g) : null;
      // A custom property, set through the CSSOM (the CSP allows no inline style attribute).
      const style = util === null ? undefined : ({ '--u': `${util}%` });
      if (util !== null) cls += ' util';
      if (!match[i]) cls += ' dim';
      const job = g.job && g.job.id !== null && !g.job.other_tenant ? g.job.id : null;
      cells.push(
        job !== null ? (
          <a class={cls} style={style} href={`/ui/jobs/${job}`} title={label} aria-label={label} data-gpu={g.index} data-job={job} />
        ) : (
          <span class={cls} style={style} role="img" title={label} aria-label={label} data-gpu={g.index} />
        ),
      );
    }
    return (
      <li class="node-row" data-node={node.name}>
        <div class="node-head">
          <Link href={nodeHref(node.name)} class="node-name">
            {node.name}
          </Link>{' '}
          <span class={`badge ns-${node.state}`}>{labelOf(lang, 'nodeState', node.state)}</span>
          {node.cordon && (
            <span class="badge cordon" title={cordonText(t, node.cordon)}>
              {labelOf(lang, 'gpu', node.cordon.kind === 'drain' ? 'drained' : 'cordoned')}
            </span>
          )}{' '}
          <span class="free">{t('fleet.freeOf', { free, total: gpus.length })}</span>
          {idle > 0 && <span class="badge idle-count">{t('fleet.sumIdle', { n: idle })}</span>}
        </div>
        <div class="cells">{cells}</div>
      </li>
    );
  }
}

export function FleetPage({ search }: { search: string }) {
  const ctx = useConsole();
  const { t, lang, api, navigate } = ctx;
  const filters = parseFleetFilters(search);
  const key = fleetParams(filters).toString();
  const [data, setData] = useState<{ nodes: FleetNode[]; gpus: FleetGpu[] } | null>(null);
  const [error, setError] = useState('');

  const loadRef = useRef<() => void>(() => undefined);
  const fetchedAt = useRef<number | null>(null);
  useEffect(() => {
    let alive = true;
    let seq = 0;
    const load = async (first = false) => {
      const mine = ++seq;
      // The map is large (5.5 MB at 10,000 GPUs): on the session's first
      // page the first fetch waits (at most FIRST_FETCH_WAIT_MS) for the
      // stream's hello, so that the hello needs no second one.
      if (first) await ctx.live.settled(FIRST_FETCH_WAIT_MS);
      if (!alive || mine !== seq) return;
      fetchedAt.current = ctx.live.now();
      const r = await guard(ctx, () => Promise.all([api.nodes(), api.gpus()]));
      if (!alive || mine !== seq) return;
      if (r instanceof Error) return setError(r.message);
      setError('');
      setData({ nodes: r[0].nodes, gpus: r[1].gpus });
    };
    loadRef.current = () => void load();
    void load(true);
    return () => {
      alive = false;
      loadRef.current = () => undefined;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  const holders = useMemo(() => (data ? holderIds(data.gpus) : new Set<number>()), [data]);
  const seen = useRef(new Map<number, string>());
  const live = useLiveRefresh(
    {
      topics: ['node', 'job'],
      pollMs: POLL_MS,
      livePollMs: LIVE_POLL_MS,
      delayMs: 500,
      minIntervalMs: 2000,
      match: (e) => e.topic === 'node' || (e.topic === 'job' && jobMovesGpus(e.data, holders, seen.current)),
      fetchedAt: () => fetchedAt.current,
    },
    () => loadRef.current(),
  );

  const view = useMemo(() => (data ? fleetView(data.nodes, data.gpus, filters) : []), [data, key]);
  const summary = useMemo(() => summarize(view), [view]);
  const rows = useMemo(() => mapRows(view, filters), [view, key]);
  const allModels = useMemo(() => (data ? models(data.gpus) : []), [data]);

  const apply = (e: Event) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget as HTMLFormElement);
    const min = String(data.get('min_free') ?? '').trim();
    const f: FleetFilters = {
      model: String(data.get('model') ?? ''),
      state: data.getAll('state').map(String) as GpuFilter[],
      node: String(data.get('node') ?? ''),
      minFree: /^\d+$/.test(min) ? Number(min) : null,
    };
    const q = fleetParams(f).toString();
    navigate(q ? `/ui/fleet?${q}` : '/ui/fleet');
  };

  // One handler for every job cell: a plain click stays in the console.
  const onMapClick = (e: MouseEvent) => {
    const a = (e.target as Element | null)?.closest?.('a.gpu');
    if (!a || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(a.getAttribute('href')!);
  };

  let shown = 0;
  for (const r of rows) shown += r.view.gpus.length;

  return (
    <section aria-labelledby="fleet-title">
      <h1 id="fleet-title">{t('fleet.title')}</h1>
      <form class="filters" onSubmit={apply} key={key} aria-label={t('fleet.filters')}>
        <label>
          {t('fleet.model')}{' '}
          <select name="model" id="filter-model" defaultValue={filters.model}>
            <option value="">{t('fleet.anyModel')}</option>
            {[...new Set([...allModels, ...(filters.model ? [filters.model] : [])])].map((m) => (
              <option value={m}>{m}</option>
            ))}
          </select>
        </label>
        <fieldset>
          <legend>{t('fleet.state')}</legend>
          {GPU_FILTERS.map((s) => (
            <label class="check">
              <input type="checkbox" name="state" value={s} defaultChecked={filters.state.includes(s)} />{' '}
              {labelOf(lang, 'gpu', s)}
            </label>
          ))}
        </fieldset>
        <label>
          {t('fleet.node')} <input name="node" id="filter-node" defaultValue={filters.node} />
        </label>
        <label>
          {t('fleet.minFree')}{' '}
          <input
            name="min_free"
            id="filter-min-free"
            type="number"
            min="0"
            step="1"
            class="short"
            defaultValue={filters.minFree === null ? '' : String(filters.minFree)}
          />
        </label>
        <button type="submit">{t('fleet.apply')}</button> <Link href="/ui/fleet">{t('fleet.clear')}</Link>
      </form>
      {error && (
        <p class="error" role="alert">
          {t('common.error', { message: error })}
        </p>
      )}
      {data === null ? (
        <p role="status">{t('common.loading')}</p>
      ) : (
        <>
          <h2>{t('fleet.summary')}</h2>
          <ul class="fleet-summary" id="fleet-summary">
            <li id="sum-gpus">{t('fleet.sumGpus', { n: summary.gpus })}</li>
            <li id="sum-free">{t('fleet.sumFree', { n: summary.free })}</li>
            <li id="sum-busy">{t('fleet.sumBusy', { n: summary.busy })}</li>
            <li id="sum-shared">{t('fleet.sumShared', { n: summary.shared })}</li>
            <li id="sum-unhealthy">{t('fleet.sumUnhealthy', { n: summary.unhealthy })}</li>
            <li id="sum-cordoned">{t('fleet.sumCordoned', { n: summary.cordoned, drained: summary.drained })}</li>
            <li id="sum-idle">{t('fleet.sumIdle', { n: summary.idle })}</li>
            {summary.meanUtil !== null && (
              <li id="sum-util">{t('fleet.sumUtil', { pct: summary.meanUtil, n: summary.sampled })}</li>
            )}
          </ul>
          <ul class="fleet-summary" id="fleet-nodes-summary">
            <li id="sum-nodes">{t('fleet.sumNodes', { n: summary.nodesReady + summary.nodesNotReady })}</li>
            <li id="sum-ready">{t('fleet.sumReady', { n: summary.nodesReady })}</li>
            <li id="sum-notready">{t('fleet.sumNotReady', { n: summary.nodesNotReady })}</li>
            <li id="sum-nodes-cordoned">{t('fleet.sumNodesCordoned', { n: summary.nodesCordoned })}</li>
          </ul>
          <table class="frag" id="fleet-frag">
            <caption>{t('fleet.frag')}</caption>
            <thead>
              <tr>
                <th scope="col">{t('fleet.fragFree')}</th>
                <th scope="col">{t('fleet.fragNodes')}</th>
              </tr>
            </thead>
            <tbody>
              {summary.byFree.map((b) => (
                <tr data-free={b.free}>
                  <th scope="row">{b.free}</th>
                  <td>
                    <span class="num">{b.nodes}</span>{' '}
                    <span
                      class="bar"
                      aria-hidden="true"
                      style={{ width: `${summary.nodesReady ? Math.round((100 * b.nodes) / summary.nodesReady) : 0}%` }}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <p id="fleet-largest">{t('fleet.largest', { n: summary.largestFree })}</p>
          <h2 id="map-title">{t('fleet.map')}</h2>
          <ul class="legend" aria-label={t('fleet.legend')}>
            {GPU_STATES.map((s) => (
              <li>
                <span class={`gpu g-${s}`} aria-hidden="true" /> {labelOf(lang, 'gpu', s)}
              </li>
            ))}
            <li>
              <span class="gpu g-busy idle" aria-hidden="true" /> {labelOf(lang, 'gpu', 'idle')}
            </li>
            <li>
              <span class="gpu g-busy util" aria-hidden="true" style={{ '--u': '60%' }} />{' '}
              {t('fleet.legendUtil')}
            </li>
          </ul>
          <p class="caption">
            {t('fleet.mapCount', { nodes: rows.length, gpus: shown })} · <LiveStatus state={live} pollMs={POLL_MS} />
          </p>
          {rows.length === 0 ? (
            <p role="status" id="fleet-empty">
              {t('fleet.empty')}
            </p>
          ) : (
            <ul class="fleet-map" id="fleet-map" aria-labelledby="map-title" data-gpus={shown} onClick={onMapClick}>
              {rows.map((r) => (
                <NodeRow
                  key={r.view.node.name}
                  view={r.view}
                  match={r.match}
                  lang={lang}
                  sig={rowSig(r.view, r.match, lang)}
                />
              ))}
            </ul>
          )}
        </>
      )}
    </section>
  );
}
