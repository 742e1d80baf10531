import { describe, expect, it } from 'vitest';
import type { JobSummary } from '../src/api';
import { appendPage, filterParams, jobsQuery, NO_FILTERS, parseFilters } from '../src/query';

const job = (id: number, state = 'Pending') => ({ id, state }) as JobSummary;

describe('filters', () => {
  it('become the query GET /v1/jobs takes, empty ones left out', () => {
    expect(jobsQuery(NO_FILTERS, { limit: 50 })).toBe('limit=50');
    expect(
      jobsQuery({ state: ['Pending', 'Running'], queue: ' train ', tenant: 'vision' }, { limit: 50 }),
    ).toBe('state=Pending%2CRunning&queue=train&tenant=vision&limit=50');
    expect(jobsQuery({ state: [''], queue: '', tenant: 'a&b' }, { limit: 10, after: 'c:12/x' })).toBe(
      'tenant=a%26b&limit=10&after=c%3A12%2Fx',
    );
  });

  it("round-trip through the console's URL", () => {
    const f = { state: ['Failed', 'Cancelled'], queue: 'q 1', tenant: 'nlp' };
    expect(parseFilters('?' + filterParams(f).toString())).toEqual(f);
    expect(parseFilters('')).toEqual(NO_FILTERS);
    expect(parseFilters('?state=Pending,,Running')).toEqual({ state: ['Pending', 'Running'], queue: '', tenant: '' });
  });
});

describe('paging', () => {
  it("appends the next page and keeps a job listed twice once, in its newest form", () => {
    const first = [job(9), job(8), job(7)];
    const second = [job(7, 'Running'), job(6), job(5)];
    const rows = appendPage(first, second);
    expect(rows.map((j) => j.id)).toEqual([9, 8, 7, 6, 5]);
    expect(rows[2].state).toBe('Running');
    expect(appendPage([], [job(1)])).toEqual([job(1)]);
  });
});
