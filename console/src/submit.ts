// What the Submit page works out, kept out of the page so it can be tested
// alone: who may submit and where, the JSON spec a form becomes, the YAML
// a form is shown as, a command line split into its arguments, and which
// field of the form a server error belongs to.
//
// POST /v1/jobs reads YAML or JSON (model::ParseJobSpec: JSON is YAML), so
// the YAML mode sends the text as written, as `berth submit FILE` does, and
// the console parses no YAML: berthd's parser is the one that decides, and
// its 400 names the field (`resources.gpus`) or, for text that is not YAML
// at all, none. Nothing is checked here that the server checks.

import { canCancel, type Caller, type QueueUsage } from './api';

// A queue a job may be submitted to: a queue below a tenant's root (the
// root itself takes no jobs), named in a spec by its path within the tenant.
export interface Target {
  path: string; // blue/train/nlp
  tenant: string; // blue
  queue: string; // train/nlp
}

// Submitting needs the role that cancelling needs: a member or
// tenant-admin of the tenant, or a platform admin (the server's
// Need::kWrite on the spec's tenant). A viewer may not.
export function canSubmitTo(caller: Caller, tenant: string): boolean {
  return canCancel(caller, tenant);
}

// Whether the caller may submit anywhere: the jobs page shows the Submit
// link only then. The server decides anyway.
export function canSubmit(caller: Caller): boolean {
  return caller.platform_admin || Object.keys(caller.tenants).some((t) => canSubmitTo(caller, t));
}

// The queues of GET /v1/queues the caller may submit to, in the API's order.
export function targetsFor(caller: Caller, queues: readonly QueueUsage[]): Target[] {
  const out: Target[] = [];
  for (const q of queues) {
    const prefix = `${q.tenant}/`;
    if (!q.queue.startsWith(prefix) || q.queue.length === prefix.length) continue;
    if (!canSubmitTo(caller, q.tenant)) continue;
    out.push({ path: q.queue, tenant: q.tenant, queue: q.queue.slice(prefix.length) });
  }
  return out;
}

export const PRIORITIES = ['low', 'normal', 'high', 'critical'] as const;

// The form as typed: every value text, as the inputs hold it.
export interface SubmitForm {
  target: string; // a Target's path
  name: string;
  gpus: string;
  gpuModel: string;
  gpuMemory: string;
  command: string;
  image: string;
  maxRuntime: string;
  priority: string;
}
export type FormKey = keyof SubmitForm;

export const EMPTY_SUBMIT: SubmitForm = {
  target: '',
  name: '',
  gpus: '1',
  gpuModel: '',
  gpuMemory: '',
  command: '',
  image: '',
  maxRuntime: '',
  priority: 'normal',
};

// A command line split as a POSIX shell splits words: blanks separate
// arguments; '…' keeps everything as written; "…" keeps everything but
// lets \ escape " \ $ ` and a newline; a \ outside quotes escapes the next
// character. No expansion of any kind: `$HOME` stays `$HOME` (the job's
// program gets what was typed). An open quote is an error.
export function splitCommand(line: string): { args: string[] } | { error: 'quote' } {
  const args: string[] = [];
  let word = '';
  let inWord = false;
  let quote: '' | "'" | '"' = '';
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote === "'") {
      if (c === "'") quote = '';
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = '';
      else if (c === '\\' && i + 1 < line.length && '"\\$`\n'.includes(line[i + 1])) word += line[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === '\\' && i + 1 < line.length) {
      word += line[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) args.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) return { error: 'quote' };
  if (inWord) args.push(word);
  return { args };
}

// A whole number as a number, anything else as typed: the server then
// names it ("'lots' is not an integer") on its field.
function count(text: string): number | string {
  return /^\d+$/.test(text) ? Number(text) : text;
}

// The JSON spec of POST /v1/jobs a form becomes: tenant and queue from the
// target, the command split into its arguments, every value trimmed, and
// an empty optional field left out (the server's default applies). GPUs
// are sent even when 0 is typed, so a GPU model or memory without GPUs is
// refused by the server on resources.gpus.
export function formSpec(f: SubmitForm, targets: readonly Target[]): { spec: Record<string, unknown> } | { error: 'quote' } {
  const cmd = splitCommand(f.command);
  if ('error' in cmd) return cmd;
  const target = targets.find((t) => t.path === f.target);
  const spec: Record<string, unknown> = { name: f.name.trim() };
  if (target) {
    spec.tenant = target.tenant;
    spec.queue = target.queue;
  }
  spec.command = cmd.args;
  const resources: Record<string, unknown> = {};
  if (f.gpus.trim()) resources.gpus = count(f.gpus.trim());
  if (f.gpuModel.trim()) resources.gpu_model = f.gpuModel.trim();
  if (f.gpuMemory.trim()) resources.gpu_memory = f.gpuMemory.trim();
  if (Object.keys(resources).length) spec.resources = resources;
  if (f.image.trim()) spec.image = f.image.trim();
  if (f.maxRuntime.trim()) spec.max_runtime = f.maxRuntime.trim();
  if (f.priority.trim() && f.priority.trim() !== 'normal') spec.priority = f.priority.trim();
  return { spec };
}

// A string as YAML: a plain word (a name, a path) as it is; anything else
// as a JSON string, which is a YAML double-quoted scalar. A word YAML
// would read as a boolean or null is quoted.
function yamlString(s: string): string {
  const plain = /^[A-Za-z_][A-Za-z0-9._/-]*$/.test(s) && !/^(true|false|yes|no|on|off|y|n|null)$/i.test(s);
  return plain ? s : JSON.stringify(s);
}

function yamlValue(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map((x) => yamlString(String(x))).join(', ')}]`;
  if (typeof v === 'number') return String(v);
  return yamlString(String(v));
}

// The spec as the YAML a user would write, one field a line, in the order
// docs/jobs.md lists them; what the YAML mode starts from.
export function specYaml(spec: Record<string, unknown>): string {
  const lines: string[] = [];
  for (const [k, v] of Object.entries(spec)) {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      lines.push(`${k}:`);
      for (const [k2, v2] of Object.entries(v)) lines.push(`  ${k2}: ${yamlValue(v2)}`);
    } else {
      lines.push(`${k}: ${yamlValue(v)}`);
    }
  }
  return lines.join('\n') + '\n';
}

// The YAML mode's first text for a target: a one-GPU job to edit.
export function templateYaml(target: Target | undefined): string {
  const spec: Record<string, unknown> = { name: 'my-job' };
  if (target) {
    spec.tenant = target.tenant;
    spec.queue = target.queue;
  }
  spec.command = ['sh', '-c', 'echo hello'];
  spec.resources = { gpus: 1 };
  return specYaml(spec);
}

// The input of the form a server error's `field` belongs to, or '' for
// one the form has no input for (the message then goes above the form,
// with the field's name).
export function formFieldOf(field: string): FormKey | '' {
  if (field === 'name') return 'name';
  if (field === 'tenant' || field === 'queue') return 'target';
  if (field === 'command' || field === 'args' || /^(command|args)\[\d+\]$/.test(field)) return 'command';
  if (field === 'resources.gpus') return 'gpus';
  if (field === 'resources.gpu_model') return 'gpuModel';
  if (field === 'resources.gpu_memory') return 'gpuMemory';
  if (field === 'image') return 'image';
  if (field === 'max_runtime') return 'maxRuntime';
  if (field === 'priority') return 'priority';
  return '';
}
