// A list read a page at a time, newest first, with "Load more" following
// the answer's `next` cursor: the jobs list, the alerts and the webhook
// deliveries. The first page can be asked again (an event, a poll) only
// while it is the only one shown, since a fresh first page would drop the
// pages loaded after it; an answer overtaken by a newer request, or by a
// change of the list's filters, is dropped rather than shown over it.

import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

export interface Page<T> {
  items: T[];
  next?: string;
}

export interface PagedList<T> {
  rows: T[] | null; // null until the first page has arrived
  next: string | undefined; // the cursor of the page after the last shown
  error: ApiError | null; // the last request's refusal, until one succeeds
  more(): Promise<void>; // the next page, merged into the rows
  refresh(): Promise<void>; // the first page again, while it is the only one shown
  update(fn: (rows: T[] | null) => T[] | null): void; // rows changed by the page itself
}

// `key` names what the list is of (its filters): a new key starts over.
// `fetchPage(after)` asks for one page (no `after`: the first); `merge`
// puts a page's items into the rows shown (the first page into []).
export function usePagedList<T>(
  key: string,
  fetchPage: (after?: string) => Promise<Page<T> | ApiError>,
  merge: (shown: T[], page: T[]) => T[],
): PagedList<T> {
  const [rows, setRows] = useState<T[] | null>(null);
  const [next, setNext] = useState<string | undefined>(undefined);
  const [error, setError] = useState<ApiError | null>(null);
  // Pages shown, and the number of the newest request: an answer to an
  // older one is dropped. Refs, so a request in flight reads them as they
  // are when it comes back.
  const pages = useRef(1);
  const seq = useRef(0);
  const busy = useRef(false);
  const nextRef = useRef<string | undefined>(undefined);
  const fetchRef = useRef(fetchPage);
  fetchRef.current = fetchPage;
  const mergeRef = useRef(merge);
  mergeRef.current = merge;

  const refresh = useCallback(async () => {
    if (pages.current !== 1) return;
    const mine = ++seq.current;
    const page = await fetchRef.current();
    if (mine !== seq.current || pages.current !== 1) return;
    if (page instanceof ApiError) return setError(page);
    setError(null);
    setRows(mergeRef.current([], page.items));
    nextRef.current = page.next;
    setNext(page.next);
  }, []);

  const more = useCallback(async () => {
    const after = nextRef.current;
    if (!after || busy.current) return;
    busy.current = true;
    // From here no first page may replace the rows.
    const before = pages.current;
    pages.current = before + 1;
    const mine = ++seq.current;
    const page = await fetchRef.current(after);
    busy.current = false;
    if (mine !== seq.current) return;
    if (page instanceof ApiError) {
      pages.current = before;
      return setError(page);
    }
    setError(null);
    setRows((shown) => mergeRef.current(shown ?? [], page.items));
    nextRef.current = page.next;
    setNext(page.next);
  }, []);

  useEffect(() => {
    pages.current = 1;
    busy.current = false;
    nextRef.current = undefined;
    setRows(null);
    setNext(undefined);
    setError(null);
    void refresh();
    return () => {
      // Whatever is in flight belongs to the old key (or a page gone).
      seq.current++;
    };
  }, [key, refresh]);

  return { rows, next, error, more, refresh, update: setRows };
}
