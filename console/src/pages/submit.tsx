// Submit a job (/ui/submit): from a form (name, queue, GPUs, GPU model and
// memory, command, image, max runtime, priority) or as YAML written by
// hand, both sent to POST /v1/jobs as the CLI sends them. The queues are
// those GET /v1/queues names in the tenants where the caller may submit;
// a viewer gets a message and no form (the server refuses anyway).
//
// The server checks everything: its 400 names a field, and the page puts
// the message on that input (Form) or beside the editor with the field's
// name (YAML). Any other refusal (a full queue, a limit, no role) is shown
// as the server wrote it. A job made opens its own page. POST /v1/jobs has
// no dry run, so the page offers none.

import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../api';
import { guard, Link, useConsole } from '../app';
import { type Key } from '../i18n';
import {
  canSubmit,
  EMPTY_SUBMIT,
  type FormKey,
  formFieldOf,
  formSpec,
  PRIORITIES,
  type SubmitForm,
  specYaml,
  type Target,
  targetsFor,
  templateYaml,
} from '../submit';

type Mode = 'form' | 'yaml';

// A refusal of the spec: `field` as the server named it ('' for none),
// `key` the input it belongs to ('' when the form has none for it).
interface FieldError {
  field: string;
  key: FormKey | '';
  message: string;
}

const INPUT_ID: Record<FormKey, string> = {
  target: 'submit-target',
  name: 'submit-name',
  gpus: 'submit-gpus',
  gpuModel: 'submit-gpu-model',
  gpuMemory: 'submit-gpu-memory',
  command: 'submit-command',
  image: 'submit-image',
  maxRuntime: 'submit-max-runtime',
  priority: 'submit-priority',
};

export function SubmitPage() {
  const ctx = useConsole();
  const { t, api, caller } = ctx;
  const allowed = canSubmit(caller);
  const [targets, setTargets] = useState<Target[] | null>(null);
  const [loadError, setLoadError] = useState('');
  const [mode, setMode] = useState<Mode>('form');
  // What was typed is kept in refs as well, so a press right after typing
  // sends what was typed.
  const formRef = useRef<SubmitForm>({ ...EMPTY_SUBMIT });
  const [form, setFormState] = useState<SubmitForm>(formRef.current);
  const setForm = (patch: Partial<SubmitForm>) => {
    formRef.current = { ...formRef.current, ...patch };
    setFormState(formRef.current);
  };
  const yamlRef = useRef('');
  const yamlEdited = useRef(false);
  const [yaml, setYamlState] = useState('');
  const setYaml = (text: string) => {
    yamlRef.current = text;
    setYamlState(text);
  };
  const [fieldErr, setFieldErr] = useState<FieldError | null>(null);
  const [refusal, setRefusal] = useState('');
  const [pending, setPending] = useState(false);

  useEffect(() => {
    if (!allowed) return;
    let alive = true;
    void guard(ctx, () => api.allQueues()).then((r) => {
      if (!alive) return;
      if (r instanceof ApiError) return setLoadError(r.message);
      const list = targetsFor(caller, r.queues);
      setTargets(list);
      if (!formRef.current.target && list.length) setForm({ target: list[0].path });
      if (!yamlEdited.current) setYaml(templateYaml(list[0]));
    });
    return () => {
      alive = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  if (!allowed) {
    return (
      <section>
        <h1>{t('submit.title')}</h1>
        <p id="submit-denied" role="alert">
          {t('submit.denied')}
        </p>
        <Link href="/ui/jobs">{t('job.back')}</Link>
      </section>
    );
  }
  if (targets === null) {
    return loadError ? (
      <p class="error" role="alert">
        {t('common.error', { message: loadError })}
      </p>
    ) : (
      <p role="status">{t('common.loading')}</p>
    );
  }
  if (targets.length === 0) {
    return (
      <section>
        <h1>{t('submit.title')}</h1>
        <p id="submit-no-queues" role="alert">
          {t('submit.noQueues')}
        </p>
      </section>
    );
  }

  const switchTo = (m: Mode) => {
    if (m === mode) return;
    setFieldErr(null);
    setRefusal('');
    // The YAML starts as the form was filled in, until it is edited.
    if (m === 'yaml' && !yamlEdited.current && formRef.current.command.trim()) {
      const made = formSpec(formRef.current, targets);
      if ('spec' in made) setYaml(specYaml(made.spec));
    }
    setMode(m);
  };

  const submit = async (e: Event) => {
    e.preventDefault();
    setFieldErr(null);
    setRefusal('');
    let body: string | Record<string, unknown>;
    if (mode === 'yaml') {
      body = yamlRef.current;
    } else {
      const made = formSpec(formRef.current, targets);
      if ('error' in made) return setFieldErr({ field: 'command', key: 'command', message: t('submit.openQuote') });
      body = made.spec;
    }
    setPending(true);
    const r = await guard(ctx, () => api.submitJob(body));
    setPending(false);
    if (!(r instanceof ApiError)) return ctx.navigate(`/ui/jobs/${r.id}`);
    if (r.status === 401) return;
    // A 400 is the spec's fault and names its field; anything else (409,
    // 429, 403, 404) refuses the submission as a whole.
    if (r.status === 400) return setFieldErr({ field: r.field, key: formFieldOf(r.field), message: r.message });
    setRefusal(r.message);
  };

  const errorOn = (k: FormKey) => (mode === 'form' && fieldErr?.key === k ? fieldErr : null);
  const described = (k: FormKey, hint: boolean) => {
    const ids = [hint ? `${INPUT_ID[k]}-hint` : '', errorOn(k) ? `${INPUT_ID[k]}-error` : ''].filter(Boolean);
    return ids.length ? ids.join(' ') : undefined;
  };
  const after = (k: FormKey, hint?: Key) => (
    <>
      {hint && (
        <span id={`${INPUT_ID[k]}-hint`} class="hint">
          {' '}
          {t(hint)}
        </span>
      )}
      {errorOn(k) && (
        <span id={`${INPUT_ID[k]}-error`} class="error field-error" role="alert">
          {' '}
          {errorOn(k)!.message}
        </span>
      )}
    </>
  );
  const input = (k: Exclude<FormKey, 'target' | 'priority'>, label: Key, hint?: Key, cls = '') => (
    <p>
      <label for={INPUT_ID[k]}>{t(label)}</label>{' '}
      <input
        id={INPUT_ID[k]}
        class={cls || undefined}
        value={form[k]}
        spellcheck={false}
        autocomplete="off"
        aria-invalid={errorOn(k) ? 'true' : undefined}
        aria-describedby={described(k, !!hint)}
        onInput={(e) => setForm({ [k]: (e.currentTarget as HTMLInputElement).value })}
      />
      {after(k, hint)}
    </p>
  );
  // An error the form has no input for, or any error in YAML mode: shown
  // with the field the server named.
  const loose = fieldErr && (mode === 'yaml' || !fieldErr.key) ? fieldErr : null;
  const looseText = loose ? t('submit.fieldError', { field: loose.field || t('submit.wholeSpec'), message: loose.message }) : '';

  return (
    <section aria-labelledby="submit-title">
      <p>
        <Link href="/ui/jobs">{t('job.back')}</Link>
      </p>
      <h1 id="submit-title">{t('submit.title')}</h1>
      <p class="help">{t('submit.help')}</p>
      {refusal && (
        <p id="submit-refused" class="error" role="alert">
          {t('submit.refused', { message: refusal })}
        </p>
      )}
      <form id="submit-form" onSubmit={submit} noValidate>
        <fieldset class="modes">
          <legend>{t('submit.mode')}</legend>
          {(['form', 'yaml'] as const).map((m) => (
            <label class="check">
              <input
                type="radio"
                name="mode"
                id={`mode-${m}`}
                value={m}
                checked={mode === m}
                onChange={() => switchTo(m)}
              />{' '}
              {t(m === 'form' ? 'submit.modeForm' : 'submit.modeYaml')}
            </label>
          ))}
        </fieldset>
        {mode === 'form' ? (
          <div id="submit-fields">
            {loose && (
              <p id="submit-error" class="error" role="alert" data-field={loose.field}>
                {looseText}
              </p>
            )}
            {input('name', 'submit.name', 'submit.nameHint')}
            <p>
              <label for={INPUT_ID.target}>{t('submit.queue')}</label>{' '}
              <select
                id={INPUT_ID.target}
                value={form.target}
                aria-invalid={errorOn('target') ? 'true' : undefined}
                aria-describedby={described('target', false)}
                onChange={(e) => setForm({ target: (e.currentTarget as HTMLSelectElement).value })}
              >
                {targets.map((q) => (
                  <option value={q.path}>{q.path}</option>
                ))}
              </select>
              {after('target')}
            </p>
            {input('command', 'submit.command', 'submit.commandHint', 'wide')}
            {input('gpus', 'col.gpus', undefined, 'short')}
            {input('gpuModel', 'submit.gpuModel', 'submit.gpuModelHint')}
            {input('gpuMemory', 'submit.gpuMemory', 'submit.gpuMemoryHint')}
            {input('image', 'submit.image', 'submit.imageHint', 'wide')}
            {input('maxRuntime', 'submit.maxRuntime', 'submit.maxRuntimeHint')}
            <p>
              <label for={INPUT_ID.priority}>{t('job.priority')}</label>{' '}
              <select
                id={INPUT_ID.priority}
                value={form.priority}
                aria-invalid={errorOn('priority') ? 'true' : undefined}
                aria-describedby={described('priority', false)}
                onChange={(e) => setForm({ priority: (e.currentTarget as HTMLSelectElement).value })}
              >
                {PRIORITIES.map((p) => (
                  <option value={p}>{t(`priority.${p}` as Key)}</option>
                ))}
              </select>
              {after('priority')}
            </p>
          </div>
        ) : (
          <div id="submit-yaml">
            <p>
              <label for="spec-yaml">{t('submit.yaml')}</label>{' '}
              <span id="spec-yaml-hint" class="hint">
                {t('submit.yamlHint')}
              </span>
            </p>
            <textarea
              id="spec-yaml"
              class="spec"
              rows={16}
              spellcheck={false}
              value={yaml}
              aria-invalid={loose ? 'true' : undefined}
              aria-describedby={loose ? 'spec-yaml-hint submit-error' : 'spec-yaml-hint'}
              onInput={(e) => {
                yamlEdited.current = true;
                setYaml((e.currentTarget as HTMLTextAreaElement).value);
              }}
            />
            {loose && (
              <p id="submit-error" class="error" role="alert" data-field={loose.field}>
                {looseText}
              </p>
            )}
          </div>
        )}
        <button type="submit" id="submit-job" disabled={pending}>
          {pending ? t('submit.sending') : t('submit.submit')}
        </button>
      </form>
    </section>
  );
}
