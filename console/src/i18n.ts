// Every string the console shows, in English and Simplified Chinese.
//
// A typed catalogue rather than an i18n library: the console has two
// languages, no plural forms beyond a number in a sentence, and about sixty
// strings; `zh` is typed as Record<Key, string>, so a key missing from
// either language fails `tsc` (and the build) before any test runs. Reasons
// and failures are not here: the server renders them in the chosen language
// (GET /v1/jobs/{id}/why?lang=zh).

export type Lang = 'en' | 'zh';
export const LANGS: readonly Lang[] = ['en', 'zh'];

const en = {
  'app.title': 'Berth console',
  'app.skip': 'Skip to content',
  'nav.jobs': 'Jobs',
  'nav.signOut': 'Sign out',
  'nav.signedInAs': 'Signed in as {name}',
  'lang.label': 'Language',
  'lang.en': 'English',
  'lang.zh': '中文（简体）',
  'signIn.title': 'Sign in',
  'signIn.token': 'API token',
  'signIn.help':
    'Paste a Berth API token (berth login prints where yours is). It is sent once to start a session and never stored by this page.',
  'signIn.submit': 'Sign in',
  'signIn.failed': 'Sign-in failed: {message}',
  'session.ended': 'Your session has ended. Sign in again.',
  'jobs.title': 'Jobs',
  'jobs.filters': 'Filters',
  'jobs.state': 'State',
  'jobs.queue': 'Queue',
  'jobs.tenant': 'Tenant',
  'jobs.anyState': 'Any state',
  'jobs.apply': 'Apply filters',
  'jobs.clear': 'Clear',
  'jobs.empty': 'No jobs match these filters.',
  'jobs.more': 'Load more',
  'jobs.polling': 'Refreshed every {seconds} s.',
  'jobs.count': '{count} jobs shown',
  'col.id': 'ID',
  'col.name': 'Name',
  'col.tenant': 'Tenant',
  'col.queue': 'Queue',
  'col.state': 'State',
  'col.user': 'Submitted by',
  'col.gpus': 'GPUs',
  'col.reason': 'Reason',
  'col.submitted': 'Submitted',
  'state.Pending': 'Pending',
  'state.Scheduled': 'Scheduled',
  'state.Running': 'Running',
  'state.Succeeded': 'Succeeded',
  'state.Failed': 'Failed',
  'state.Cancelled': 'Cancelled',
  'job.title': 'Job {id}: {name}',
  'job.back': 'Back to jobs',
  'job.summary': 'Summary',
  'job.why': 'Why',
  'job.reasonCode': 'Reason code',
  'job.timeline': 'Events that explain it',
  'job.noEvents': 'No events explain this state.',
  'job.started': 'Started',
  'job.finished': 'Finished',
  'job.replicas': 'Replicas',
  'job.priority': 'Priority',
  'job.notStarted': 'not yet',
  'job.cancel': 'Cancel job',
  'job.cancelConfirm': 'Cancel job {id}? Its runs are stopped.',
  'job.cancelYes': 'Yes, cancel it',
  'job.cancelNo': 'Keep it',
  'job.cancelRequested': 'Cancellation requested.',
  'job.cancelFailed': 'Could not cancel: {message}',
  'job.notFound': 'Job {id} was not found, or is not yours to see.',
  'common.loading': 'Loading…',
  'common.error': 'Error: {message}',
  'common.none': '—',
} as const;

export type Key = keyof typeof en;

const zh: Record<Key, string> = {
  'app.title': 'Berth 控制台',
  'app.skip': '跳到正文',
  'nav.jobs': '作业',
  'nav.signOut': '退出登录',
  'nav.signedInAs': '当前用户：{name}',
  'lang.label': '语言',
  'lang.en': 'English',
  'lang.zh': '中文（简体）',
  'signIn.title': '登录',
  'signIn.token': 'API 令牌',
  'signIn.help':
    '粘贴一个 Berth API 令牌（berth login 会告诉你它在哪里）。它只在建立会话时发送一次，本页面不会保存它。',
  'signIn.submit': '登录',
  'signIn.failed': '登录失败：{message}',
  'session.ended': '会话已结束，请重新登录。',
  'jobs.title': '作业',
  'jobs.filters': '筛选',
  'jobs.state': '状态',
  'jobs.queue': '队列',
  'jobs.tenant': '租户',
  'jobs.anyState': '任意状态',
  'jobs.apply': '应用筛选',
  'jobs.clear': '清除',
  'jobs.empty': '没有符合筛选条件的作业。',
  'jobs.more': '加载更多',
  'jobs.polling': '每 {seconds} 秒刷新一次。',
  'jobs.count': '已显示 {count} 个作业',
  'col.id': '编号',
  'col.name': '名称',
  'col.tenant': '租户',
  'col.queue': '队列',
  'col.state': '状态',
  'col.user': '提交者',
  'col.gpus': 'GPU 数',
  'col.reason': '原因',
  'col.submitted': '提交时间',
  'state.Pending': '等待中',
  'state.Scheduled': '已调度',
  'state.Running': '运行中',
  'state.Succeeded': '已成功',
  'state.Failed': '已失败',
  'state.Cancelled': '已取消',
  'job.title': '作业 {id}：{name}',
  'job.back': '返回作业列表',
  'job.summary': '概要',
  'job.why': '原因',
  'job.reasonCode': '原因代码',
  'job.timeline': '相关事件',
  'job.noEvents': '没有可以解释此状态的事件。',
  'job.started': '开始时间',
  'job.finished': '结束时间',
  'job.replicas': '副本数',
  'job.priority': '优先级',
  'job.notStarted': '尚未开始',
  'job.cancel': '取消作业',
  'job.cancelConfirm': '确定取消作业 {id} 吗？它的运行将被停止。',
  'job.cancelYes': '确定取消',
  'job.cancelNo': '保留',
  'job.cancelRequested': '已请求取消。',
  'job.cancelFailed': '无法取消：{message}',
  'job.notFound': '作业 {id} 不存在，或你无权查看。',
  'common.loading': '加载中…',
  'common.error': '出错：{message}',
  'common.none': '—',
};

export const CATALOGUES: Record<Lang, Record<Key, string>> = { en, zh };

export const JOB_STATES = ['Pending', 'Scheduled', 'Running', 'Succeeded', 'Failed', 'Cancelled'] as const;
export type JobState = (typeof JOB_STATES)[number];

// The language of a browser locale ("zh-CN", "zh_Hans", "en-GB"), or null
// for one the console does not speak.
export function langOf(locale: string | null | undefined): Lang | null {
  if (!locale) return null;
  const base = locale.toLowerCase().split(/[-_]/)[0];
  return base === 'zh' ? 'zh' : base === 'en' ? 'en' : null;
}

// The language to show: the one chosen before (localStorage), else the
// browser's first language the console speaks, else English.
export function pickLang(stored: string | null, browser: readonly string[]): Lang {
  if (stored === 'en' || stored === 'zh') return stored;
  for (const locale of browser) {
    const lang = langOf(locale);
    if (lang) return lang;
  }
  return 'en';
}

// The string for `key` in `lang`, with each {name} replaced by vars[name].
export function translate(lang: Lang, key: Key, vars: Record<string, string | number> = {}): string {
  return CATALOGUES[lang][key].replace(/\{(\w+)\}/g, (whole, name: string) =>
    name in vars ? String(vars[name]) : whole,
  );
}

export function stateLabel(lang: Lang, state: string): string {
  const key = `state.${state}` as Key;
  return key in CATALOGUES[lang] ? translate(lang, key) : state;
}

export const LANG_STORAGE_KEY = 'berth.console.lang';
