// The jobs list's filters as the CLI has them (berth jobs --state --queue
// --tenant), in the API's query string and in the console's own URL, so a
// filtered list is a link that can be shared; and the list's paging.

import type { JobSummary } from './api';

export interface JobFilters {
  state: string[];
  queue: string;
  tenant: string;
}

export const NO_FILTERS: JobFilters = { state: [], queue: '', tenant: '' };

// The filters as query parameters: empty ones left out, states
// comma-separated as GET /v1/jobs takes them.
export function filterParams(f: JobFilters): URLSearchParams {
  const p = new URLSearchParams();
  const states = f.state.map((s) => s.trim()).filter(Boolean);
  if (states.length) p.set('state', states.join(','));
  if (f.queue.trim()) p.set('queue', f.queue.trim());
  if (f.tenant.trim()) p.set('tenant', f.tenant.trim());
  return p;
}

// GET /v1/jobs's query: the filters, the page size and where the page
// starts (`after`, the previous page's `next`, passed unchanged).
export function jobsQuery(f: JobFilters, page: { limit: number; after?: string }): string {
  const p = filterParams(f);
  p.set('limit', String(page.limit));
  if (page.after) p.set('after', page.after);
  return p.toString();
}

// The filters of a console URL's query (/ui/jobs?state=Pending&queue=q).
export function parseFilters(search: string): JobFilters {
  const p = new URLSearchParams(search);
  const state = (p.get('state') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return { state, queue: p.get('queue') ?? '', tenant: p.get('tenant') ?? '' };
}

// The rows after one more page: the page's rows appended, any row already
// shown (a job listed again as the list moved) kept once, in its newest form.
export function appendPage(shown: JobSummary[], page: JobSummary[]): JobSummary[] {
  const fresh = new Map(page.map((j) => [j.id, j]));
  const kept = shown.map((j) => fresh.get(j.id) ?? j);
  const seen = new Set(shown.map((j) => j.id));
  return kept.concat(page.filter((j) => !seen.has(j.id)));
}
