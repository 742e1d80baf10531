// The console's shell: who is signed in, the language, and which page the
// URL under /ui/ names. Pages: sign-in, the jobs list (/ui/jobs, with its
// filters in the query), one job (/ui/jobs/ID), submitting a job
// (/ui/submit), the fleet's GPU map
// (/ui/fleet, filters in the query), one node (/ui/fleet/NODE), the
// tenants the caller may open (/ui/tenants), one tenant (/ui/tenants/T),
// the policy (/ui/policy): one version (/ui/policy/versions/N) and the
// diff of two (/ui/policy/diff?from=A&to=B); alerts (/ui/alerts, filters in
// the query; a platform admin's), the operations report
// (/ui/reports/ops?from=24h) and cost (/ui/cost, the period in the query);
// services and sessions (/ui/services, filters in the query) and one
// (/ui/services/TENANT/NAME).

import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { ApiError, type BerthApi, type Caller } from './api';
import { LANG_STORAGE_KEY, LANGS, type Key, type Lang, pickLang, translate } from './i18n';
import { LiveHub } from './live';
import { AlertsPage } from './pages/alerts';
import { CostPage } from './pages/cost';
import { FleetPage } from './pages/fleet';
import { JobPage } from './pages/job';
import { JobsPage } from './pages/jobs';
import { NodePage } from './pages/node';
import { PolicyDiffPage, PolicyPage, PolicyVersionPage } from './pages/policy';
import { ReportPage } from './pages/report';
import { ServicePage, ServicesPage } from './pages/services';
import { SignIn } from './pages/sign-in';
import { SubmitPage } from './pages/submit';
import { TenantPage, TenantsPage } from './pages/tenant';

export interface Ctx {
  api: BerthApi;
  lang: Lang;
  caller: Caller;
  t: (key: Key, vars?: Record<string, string | number>) => string;
  navigate: (to: string) => void;
  // A 401 from any request: the session ended (expired, revoked, signed out
  // elsewhere); back to sign-in.
  sessionEnded: () => void;
  // The tab's event stream (GET /v1/events), open while signed in.
  live: LiveHub;
}

export const ConsoleContext = createContext<Ctx | null>(null);

export function useConsole(): Ctx {
  const ctx = useContext(ConsoleContext);
  if (!ctx) throw new Error('useConsole outside the console');
  return ctx;
}

// Runs `fn`; a 401 ends the session, anything else is returned as text.
export async function guard<T>(ctx: Ctx, fn: () => Promise<T>): Promise<T | ApiError> {
  try {
    return await fn();
  } catch (e) {
    const err = e instanceof ApiError ? e : new ApiError(0, String(e));
    if (err.status === 401) ctx.sessionEnded();
    return err;
  }
}

function storedLang(): string | null {
  try {
    return localStorage.getItem(LANG_STORAGE_KEY);
  } catch {
    return null;
  }
}

function browserLangs(): string[] {
  if (navigator.languages && navigator.languages.length) return [...navigator.languages];
  return navigator.language ? [navigator.language] : [];
}

export function Link({
  href,
  children,
  class: cls,
  current,
  id,
}: {
  href: string;
  children: preact.ComponentChildren;
  class?: string;
  current?: boolean;
  id?: string;
}) {
  const { navigate } = useConsole();
  return (
    <a
      href={href}
      id={id}
      class={cls}
      aria-current={current ? 'page' : undefined}
      onClick={(e) => {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    >
      {children}
    </a>
  );
}

function LanguageSwitch({ lang, setLang }: { lang: Lang; setLang: (l: Lang) => void }) {
  const label = translate(lang, 'lang.label');
  return (
    <label class="lang">
      {label}{' '}
      <select
        id="lang-select"
        value={lang}
        onChange={(e) => setLang((e.currentTarget as HTMLSelectElement).value as Lang)}
      >
        {LANGS.map((l) => (
          <option value={l} lang={l === 'zh' ? 'zh-CN' : 'en'}>
            {translate(l, `lang.${l}` as Key)}
          </option>
        ))}
      </select>
    </label>
  );
}

// A node name from its URL segment; a malformed escape is taken as written.
function decodeName(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

// `live` is the tab's one event stream (main.tsx gives it the browser's
// EventSource); without one the views poll, as the page tests have it.
export function App({ api, live: given }: { api: BerthApi; live?: LiveHub }) {
  const live = useMemo(() => given ?? new LiveHub(), [given]);
  const [lang, setLangState] = useState<Lang>(() => pickLang(storedLang(), browserLangs()));
  // undefined: still asking the server whether a session exists.
  const [caller, setCaller] = useState<Caller | null | undefined>(undefined);
  const [notice, setNotice] = useState<string>('');
  const [url, setUrl] = useState(location.pathname + location.search);

  const setLang = useCallback((l: Lang) => {
    setLangState(l);
    try {
      localStorage.setItem(LANG_STORAGE_KEY, l);
    } catch {
      // A browser that keeps nothing still switches for this visit.
    }
  }, []);

  useEffect(() => {
    document.documentElement.lang = lang === 'zh' ? 'zh-CN' : 'en';
    document.title = translate(lang, 'app.title');
  }, [lang]);

  useEffect(() => {
    api.session().then(
      (c) => setCaller(c),
      () => setCaller(null),
    );
    const onPop = () => setUrl(location.pathname + location.search);
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, [api]);

  const navigate = useCallback((to: string) => {
    history.pushState(null, '', to);
    setUrl(to);
    scrollTo(0, 0);
  }, []);

  const t = useCallback((key: Key, vars?: Record<string, string | number>) => translate(lang, key, vars), [lang]);

  const sessionEnded = () => {
    setNotice(t('session.ended'));
    setCaller(null);
  };
  const endedRef = useRef(sessionEnded);
  endedRef.current = sessionEnded;

  // The event stream lives as long as the session: opened after sign-in,
  // closed on sign-out or when the session ends. The server's `end` (or a
  // stream refused for a 401) is the same sign-in as a request's 401.
  useEffect(() => {
    if (!caller) return;
    live.start({
      ended: () => endedRef.current(),
      signedIn: () => api.session().then((c) => c !== null),
    });
    return () => live.stop();
  }, [caller, live, api]);

  const header = (
    <header class="top">
      <a class="skip" href="#main">
        {t('app.skip')}
      </a>
      <span class="brand">{t('app.title')}</span>
      <LanguageSwitch lang={lang} setLang={setLang} />
    </header>
  );

  if (caller === undefined) {
    return (
      <>
        {header}
        <main id="main">
          <p role="status">{t('common.loading')}</p>
        </main>
      </>
    );
  }
  if (caller === null) {
    return (
      <>
        {header}
        <main id="main">
          <SignIn
            api={api}
            t={t}
            notice={notice}
            onSignedIn={(c) => {
              setNotice('');
              setCaller(c);
            }}
          />
        </main>
      </>
    );
  }

  const ctx: Ctx = {
    api,
    lang,
    caller,
    t,
    navigate,
    sessionEnded,
    live,
  };
  const path = url.split('?')[0];
  const search = url.includes('?') ? url.slice(url.indexOf('?')) : '';
  const jobMatch = /^\/ui\/jobs\/(\d+)\/?$/.exec(path);
  const nodeMatch = /^\/ui\/fleet\/([^/]+)\/?$/.exec(path);
  const inFleet = /^\/ui\/fleet(\/|$)/.test(path);
  const tenantMatch = /^\/ui\/tenants\/([^/]+)\/?$/.exec(path);
  const inTenants = /^\/ui\/tenants(\/|$)/.test(path);
  const versionMatch = /^\/ui\/policy\/versions\/(\d+)\/?$/.exec(path);
  const inDiff = /^\/ui\/policy\/diff\/?$/.test(path);
  const inPolicy = /^\/ui\/policy(\/|$)/.test(path);
  const inAlerts = /^\/ui\/alerts\/?$/.test(path);
  const inReport = /^\/ui\/reports(\/ops)?\/?$/.test(path);
  const inCost = /^\/ui\/cost\/?$/.test(path);
  // services and sessions
  const serviceMatch = /^\/ui\/services\/([^/]+)\/([^/]+)\/?$/.exec(path);
  const inServices = /^\/ui\/services(\/|$)/.test(path);
  let page;
  if (serviceMatch) page = <ServicePage tenant={decodeName(serviceMatch[1])} name={decodeName(serviceMatch[2])} />;
  else if (inServices) page = <ServicesPage search={search} />;
  else if (inAlerts) page = <AlertsPage search={search} />;
  else if (inReport) page = <ReportPage search={search} />;
  else if (inCost) page = <CostPage search={search} />;
  else if (versionMatch) page = <PolicyVersionPage version={Number(versionMatch[1])} />;
  else if (inDiff) page = <PolicyDiffPage search={search} />;
  else if (inPolicy) page = <PolicyPage />;
  else if (tenantMatch) page = <TenantPage tenant={decodeName(tenantMatch[1])} />;
  else if (inTenants) page = <TenantsPage />;
  else if (jobMatch) page = <JobPage id={Number(jobMatch[1])} />;
  else if (/^\/ui\/submit\/?$/.test(path)) page = <SubmitPage />;
  else if (nodeMatch) page = <NodePage name={decodeName(nodeMatch[1])} />;
  else if (inFleet) page = <FleetPage search={search} />;
  else page = <JobsPage search={search} />;

  return (
    <ConsoleContext.Provider value={ctx}>
      <header class="top">
        <a class="skip" href="#main">
          {t('app.skip')}
        </a>
        <span class="brand">{t('app.title')}</span>
        <nav aria-label={t('nav.main')}>
          <Link
            href="/ui/jobs"
            current={!inFleet && !inTenants && !inPolicy && !inAlerts && !inReport && !inCost && !inServices}
          >
            {t('nav.jobs')}
          </Link>{' '}
          <Link href="/ui/services" current={inServices}>
            {t('nav.services')}
          </Link>{' '}
          <Link href="/ui/fleet" current={inFleet}>
            {t('nav.fleet')}
          </Link>{' '}
          <Link href="/ui/tenants" current={inTenants}>
            {t('nav.tenants')}
          </Link>{' '}
          <Link href="/ui/policy" current={inPolicy}>
            {t('nav.policy')}
          </Link>{' '}
          {caller.platform_admin && (
            <>
              <Link href="/ui/alerts" current={inAlerts}>
                {t('nav.alerts')}
              </Link>{' '}
            </>
          )}
          <Link href="/ui/reports/ops" current={inReport}>
            {t('nav.report')}
          </Link>{' '}
          <Link href="/ui/cost" current={inCost}>
            {t('nav.cost')}
          </Link>
        </nav>
        <span class="who">{t('nav.signedInAs', { name: caller.name })}</span>
        <LanguageSwitch lang={lang} setLang={setLang} />
        <button
          type="button"
          id="sign-out"
          onClick={async () => {
            await api.signOut().catch(() => undefined);
            setCaller(null);
          }}
        >
          {t('nav.signOut')}
        </button>
      </header>
      <main id="main">
        {page}
      </main>
    </ConsoleContext.Provider>
  );
}
