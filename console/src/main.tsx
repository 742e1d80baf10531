import { render } from 'preact';
import { BerthApi } from './api';
import { App } from './app';
import { LiveHub } from './live';
import './styles.css';

// One event stream for the tab (same origin, so it carries the session
// cookie); a browser without EventSource polls.
const live = new LiveHub({ source: typeof EventSource === 'undefined' ? null : EventSource });
render(<App api={new BerthApi()} live={live} />, document.getElementById('app')!);
