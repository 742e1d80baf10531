// A fake of the browser's EventSource for the console's tests.
import type { EventSourceLike } from '../src/live';

// An EventSource the test drives: what berthd would send, and the browser's
// two kinds of error (reconnecting by itself, or giving up).
export class FakeSource implements EventSourceLike {
  static made: FakeSource[] = [];
  readyState = 0;
  closed = false;
  private listeners = new Map<string, ((ev: MessageEvent) => void)[]>();
  constructor(readonly url: string) {
    FakeSource.made.push(this);
  }
  addEventListener(type: string, fn: (ev: MessageEvent) => void) {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), fn]);
  }
  close() {
    this.readyState = 2;
    this.closed = true;
  }
  emit(type: string, data: unknown = {}, id = '') {
    if (type !== 'error') this.readyState = 1;
    const ev = { data: typeof data === 'string' ? data : JSON.stringify(data), lastEventId: id } as MessageEvent;
    for (const fn of this.listeners.get(type) ?? []) fn(ev);
  }
  hello(epoch = 'e1', seq = 0) {
    this.emit('hello', { epoch, seq }, `${epoch}-${seq}`);
  }
  job(id: number, state = 'Running', eventId = '') {
    this.emit('job', { id, tenant: 'blue', queue: 'main', state }, eventId);
  }
  // The connection dropped; the browser reconnects by itself.
  drop() {
    this.readyState = 0;
    this.emit('error');
  }
  // An HTTP error: the browser gives up.
  refuse() {
    this.readyState = 2;
    this.emit('error');
  }
}

