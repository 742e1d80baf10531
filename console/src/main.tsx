import { render } from 'preact';
import { BerthApi } from './api';
import { App } from './app';
import './styles.css';

render(<App api={new BerthApi()} />, document.getElementById('app')!);
