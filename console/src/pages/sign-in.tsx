// Sign-in: a token pasted once starts a session (POST /v1/console/session);
// the field is cleared whatever the answer, and the token is kept nowhere.

import { useState } from 'preact/hooks';
import type { BerthApi, Caller } from '../api';
import type { Key } from '../i18n';

export function SignIn({
  api,
  t,
  notice,
  onSignedIn,
}: {
  api: BerthApi;
  t: (key: Key, vars?: Record<string, string | number>) => string;
  notice: string;
  onSignedIn: (c: Caller) => void;
}) {
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  return (
    <section class="card sign-in" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">{t('signIn.title')}</h1>
      {notice && <p role="status">{notice}</p>}
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          const input = (e.currentTarget as HTMLFormElement).elements.namedItem('token') as HTMLInputElement;
          const token = input.value;
          input.value = '';
          if (!token.trim()) return;
          setBusy(true);
          setError('');
          try {
            onSignedIn(await api.signIn(token));
          } catch (err) {
            setError(t('signIn.failed', { message: err instanceof Error ? err.message : String(err) }));
          } finally {
            setBusy(false);
          }
        }}
      >
        <label for="token">{t('signIn.token')}</label>
        <input id="token" name="token" type="password" autocomplete="off" spellcheck={false} required />
        <p class="help" id="token-help">
          {t('signIn.help')}
        </p>
        <button type="submit" disabled={busy}>
          {t('signIn.submit')}
        </button>
      </form>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </section>
  );
}
