import { render } from 'preact';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError } from '../src/api';
import { type Page, type PagedList, usePagedList } from '../src/paging';
import { settle } from './support';

interface Row {
  id: number;
  v: string;
}

// Newest first; a row listed again is kept once, in its newest form.
const merge = (shown: Row[], page: Row[]) => {
  const byId = new Map(shown.map((r) => [r.id, r]));
  for (const r of page) byId.set(r.id, r);
  return [...byId.values()].sort((a, b) => b.id - a.id);
};

// A fetch the test answers by hand, request by request.
function server() {
  const asked: { key: string; after?: string; answer: (p: Page<Row> | ApiError) => void }[] = [];
  return {
    asked,
    fetch: (key: string) => (after?: string) =>
      new Promise<Page<Row> | ApiError>((answer) => asked.push({ key, after, answer })),
  };
}

function mount(key: string, srv: ReturnType<typeof server>) {
  const out: { list: PagedList<Row> | null } = { list: null };
  function Probe({ k }: { k: string }) {
    out.list = usePagedList<Row>(k, srv.fetch(k), merge);
    return null;
  }
  const root = document.createElement('div');
  document.body.appendChild(root);
  render(<Probe k={key} />, root);
  return { out, rerender: (k: string) => render(<Probe k={k} />, root) };
}

const rows = (...ids: number[]) => ids.map((id) => ({ id, v: `v${id}` }));
const tick = () => new Promise((r) => setTimeout(r, 0));

describe('the shared paging hook', () => {
  afterEach(() => {
    document.body.innerHTML = '';
  });

  it('shows the first page, appends the next one by its cursor, and keeps a row listed twice once', async () => {
    const srv = server();
    const { out } = mount('a', srv);
    await settle(() => srv.asked.length === 1);
    expect(out.list!.rows).toBeNull();
    expect(srv.asked[0].after).toBeUndefined();
    srv.asked[0].answer({ items: rows(9, 8), next: 'c1' });
    await settle(() => out.list!.rows !== null);
    expect(out.list!.rows!.map((r) => r.id)).toEqual([9, 8]);
    expect(out.list!.next).toBe('c1');
    void out.list!.more();
    await settle(() => srv.asked.length === 2);
    expect(srv.asked[1].after).toBe('c1');
    srv.asked[1].answer({ items: [{ id: 8, v: 'moved' }, ...rows(7)] });
    await settle(() => out.list!.rows!.length === 3);
    expect(out.list!.rows).toEqual([{ id: 9, v: 'v9' }, { id: 8, v: 'moved' }, { id: 7, v: 'v7' }]);
    expect(out.list!.next).toBeUndefined();
  });

  it('asks for the first page again only while it is the only one shown', async () => {
    const srv = server();
    const { out } = mount('a', srv);
    await settle(() => srv.asked.length === 1);
    srv.asked[0].answer({ items: rows(2, 1), next: 'c1' });
    await settle(() => out.list!.rows !== null);
    void out.list!.refresh();
    await settle(() => srv.asked.length === 2);
    srv.asked[1].answer({ items: rows(3, 2), next: 'c2' });
    await settle(() => out.list!.rows!.length === 2 && out.list!.rows![0].id === 3);
    expect(out.list!.next).toBe('c2');
    void out.list!.more();
    await settle(() => srv.asked.length === 3);
    srv.asked[2].answer({ items: rows(1) });
    await settle(() => out.list!.rows!.length === 3);
    // Two pages shown: a refresh would drop the second, so none is asked.
    void out.list!.refresh();
    await tick();
    expect(srv.asked.length).toBe(3);
  });

  it('drops a first page that a "Load more" overtook, and one overtaken by a newer refresh', async () => {
    const srv = server();
    const { out } = mount('a', srv);
    await settle(() => srv.asked.length === 1);
    srv.asked[0].answer({ items: rows(5, 4), next: 'c1' });
    await settle(() => out.list!.rows !== null);
    // Two refreshes in flight: only the newer is shown, whichever comes back first.
    void out.list!.refresh();
    void out.list!.refresh();
    await settle(() => srv.asked.length === 3);
    srv.asked[2].answer({ items: rows(7, 6), next: 'new' });
    await settle(() => out.list!.rows![0].id === 7);
    srv.asked[1].answer({ items: rows(6, 5), next: 'old' });
    await tick();
    expect(out.list!.rows!.map((r) => r.id)).toEqual([7, 6]);
    expect(out.list!.next).toBe('new');
    // A refresh, then "Load more" before it answers: the refresh's page is dropped.
    void out.list!.refresh();
    void out.list!.more();
    await settle(() => srv.asked.length === 5);
    expect(srv.asked[4].after).toBe('new');
    srv.asked[3].answer({ items: rows(8, 7), next: 'x' });
    srv.asked[4].answer({ items: rows(5, 4) });
    await settle(() => out.list!.rows!.length === 4);
    expect(out.list!.rows!.map((r) => r.id)).toEqual([7, 6, 5, 4]);
  });

  it('starts over for a new key and drops what the old one still had in flight', async () => {
    const srv = server();
    const { out, rerender } = mount('a', srv);
    await settle(() => srv.asked.length === 1);
    rerender('b');
    await settle(() => srv.asked.length === 2);
    expect(srv.asked[1].key).toBe('b');
    srv.asked[0].answer({ items: rows(1) });
    srv.asked[1].answer({ items: rows(2) });
    await settle(() => out.list!.rows !== null);
    await tick();
    expect(out.list!.rows!.map((r) => r.id)).toEqual([2]);
  });

  it("keeps the rows on a refusal, says so, and lets 'Load more' be tried again", async () => {
    const srv = server();
    const { out } = mount('a', srv);
    await settle(() => srv.asked.length === 1);
    srv.asked[0].answer({ items: rows(2), next: 'c1' });
    await settle(() => out.list!.rows !== null);
    void out.list!.more();
    await settle(() => srv.asked.length === 2);
    srv.asked[1].answer(new ApiError(503, 'berthd is busy'));
    await settle(() => out.list!.error !== null);
    expect(out.list!.error!.message).toBe('berthd is busy');
    expect(out.list!.rows!.map((r) => r.id)).toEqual([2]);
    // The failed page was not counted: the first page may be refreshed again.
    void out.list!.refresh();
    await settle(() => srv.asked.length === 3);
    expect(srv.asked[2].after).toBeUndefined();
    srv.asked[2].answer({ items: rows(3, 2), next: 'c1' });
    await settle(() => out.list!.error === null);
  });

  it('changes rows the page changed itself', async () => {
    const srv = server();
    const { out } = mount('a', srv);
    await settle(() => srv.asked.length === 1);
    srv.asked[0].answer({ items: rows(2, 1) });
    await settle(() => out.list!.rows !== null);
    out.list!.update((shown) => merge(shown ?? [], [{ id: 1, v: 'resolved' }]));
    await settle(() => out.list!.rows![1].v === 'resolved');
  });
});
