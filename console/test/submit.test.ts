import { describe, expect, it } from 'vitest';
import type { Caller, QueueUsage } from '../src/api';
import {
  canSubmit,
  canSubmitTo,
  EMPTY_SUBMIT,
  formFieldOf,
  formSpec,
  specYaml,
  splitCommand,
  targetsFor,
  templateYaml,
} from '../src/submit';

const caller = (extra: Partial<Caller>): Caller => ({
  name: 'x',
  kind: 'user',
  platform_admin: false,
  tenants: {},
  console: null,
  ...extra,
});

const row = (queue: string, parent: string | null): QueueUsage => ({
  queue,
  tenant: queue.split('/')[0],
  parent,
  kind: 'training',
  over_quota: 'borrow',
  used_mgpu: 0,
  running_jobs: 0,
  guaranteed_mgpu: null,
  borrow_limit_mgpu: null,
  lending_limit_mgpu: null,
  borrowed_mgpu: null,
  idle_guaranteed_mgpu: null,
  lendable_mgpu: null,
});

// GET /v1/queues for a platform admin: two tenants, one nested queue.
const queues = [
  row('blue', null),
  row('blue/main', 'blue'),
  row('blue/train', 'blue'),
  row('blue/train/nlp', 'blue/train'),
  row('red', null),
  row('red/main', 'red'),
];

describe('who may submit, and where', () => {
  it('is a member, tenant-admin or platform admin; never a viewer', () => {
    expect(canSubmit(caller({ tenants: { blue: 'member' } }))).toBe(true);
    expect(canSubmit(caller({ tenants: { blue: 'tenant-admin' } }))).toBe(true);
    expect(canSubmit(caller({ platform_admin: true }))).toBe(true);
    expect(canSubmit(caller({ tenants: { blue: 'viewer' } }))).toBe(false);
    expect(canSubmit(caller({}))).toBe(false);
    const mixed = caller({ tenants: { blue: 'viewer', red: 'member' } });
    expect(canSubmit(mixed)).toBe(true);
    expect(canSubmitTo(mixed, 'blue')).toBe(false);
    expect(canSubmitTo(mixed, 'red')).toBe(true);
  });

  it("offers the queues below each tenant's root where the caller may submit, named within the tenant", () => {
    const mixed = caller({ tenants: { blue: 'viewer', red: 'member' } });
    expect(targetsFor(mixed, queues)).toEqual([{ path: 'red/main', tenant: 'red', queue: 'main' }]);
    expect(targetsFor(caller({ platform_admin: true }), queues).map((t) => [t.tenant, t.queue])).toEqual([
      ['blue', 'main'],
      ['blue', 'train'],
      ['blue', 'train/nlp'],
      ['red', 'main'],
    ]);
  });
});

describe('a command line', () => {
  it('splits on blanks, keeps quoted text whole and expands nothing', () => {
    expect(splitCommand("sh -c 'echo hello; sleep 2; echo done'")).toEqual({
      args: ['sh', '-c', 'echo hello; sleep 2; echo done'],
    });
    expect(splitCommand('  python3   train.py --lr=0.1 ')).toEqual({ args: ['python3', 'train.py', '--lr=0.1'] });
    expect(splitCommand('echo "a \\"b\\" $HOME" \'\' x\\ y')).toEqual({ args: ['echo', 'a "b" $HOME', '', 'x y'] });
    expect(splitCommand('echo "c:\\dir"')).toEqual({ args: ['echo', 'c:\\dir'] });
    expect(splitCommand('')).toEqual({ args: [] });
  });

  it('refuses an open quote', () => {
    expect(splitCommand("sh -c 'echo")).toEqual({ error: 'quote' });
    expect(splitCommand('echo "x')).toEqual({ error: 'quote' });
  });
});

describe('the spec a form becomes', () => {
  const targets = targetsFor(caller({ platform_admin: true }), queues);

  it('is the JSON berth submit would send: tenant and queue apart, argv, GPUs as a number, empty fields left out', () => {
    const made = formSpec(
      { ...EMPTY_SUBMIT, target: 'blue/train/nlp', name: ' bert ', gpus: '2', command: "sh -c 'echo hi'", maxRuntime: '2h' },
      targets,
    );
    expect(made).toEqual({
      spec: {
        name: 'bert',
        tenant: 'blue',
        queue: 'train/nlp',
        command: ['sh', '-c', 'echo hi'],
        resources: { gpus: 2 },
        max_runtime: '2h',
      },
    });
  });

  it('sends what is not a whole number as typed, for the server to name', () => {
    const made = formSpec(
      {
        ...EMPTY_SUBMIT,
        target: 'red/main',
        name: 'x',
        gpus: 'lots',
        gpuModel: 'H100-80GB',
        gpuMemory: '80Gi',
        command: 'true',
        image: 'docker.io/library/busybox:1',
        priority: 'high',
      },
      targets,
    );
    expect(made).toEqual({
      spec: {
        name: 'x',
        tenant: 'red',
        queue: 'main',
        command: ['true'],
        resources: { gpus: 'lots', gpu_model: 'H100-80GB', gpu_memory: '80Gi' },
        image: 'docker.io/library/busybox:1',
        priority: 'high',
      },
    });
  });

  it('is refused with an open quote in the command', () => {
    expect(formSpec({ ...EMPTY_SUBMIT, command: "echo 'x" }, targets)).toEqual({ error: 'quote' });
  });

  it('reads as YAML one field a line, strings quoted as JSON quotes them', () => {
    const made = formSpec(
      { ...EMPTY_SUBMIT, target: 'blue/main', name: 'demo', command: `sh -c 'echo "hi"; echo: done'` },
      targets,
    );
    if (!('spec' in made)) throw new Error('no spec');
    expect(specYaml(made.spec)).toBe(
      [
        'name: demo',
        'tenant: blue',
        'queue: main',
        'command: [sh, "-c", "echo \\"hi\\"; echo: done"]',
        'resources:',
        '  gpus: 1',
        '',
      ].join('\n'),
    );
    expect(specYaml({ name: 'yes', max_runtime: '2h', image: 'docker.io/x/y:1' })).toBe(
      'name: "yes"\nmax_runtime: "2h"\nimage: "docker.io/x/y:1"\n',
    );
    expect(templateYaml(targets[0])).toBe(
      'name: my-job\ntenant: blue\nqueue: main\ncommand: [sh, "-c", "echo hello"]\nresources:\n  gpus: 1\n',
    );
  });
});

describe("a server error's field", () => {
  it('lands on the input it names; anything else goes above the form', () => {
    expect(formFieldOf('resources.gpus')).toBe('gpus');
    expect(formFieldOf('resources.gpu_model')).toBe('gpuModel');
    expect(formFieldOf('resources.gpu_memory')).toBe('gpuMemory');
    expect(formFieldOf('queue')).toBe('target');
    expect(formFieldOf('tenant')).toBe('target');
    expect(formFieldOf('command[0]')).toBe('command');
    expect(formFieldOf('command')).toBe('command');
    expect(formFieldOf('max_runtime')).toBe('maxRuntime');
    expect(formFieldOf('name')).toBe('name');
    expect(formFieldOf('image')).toBe('image');
    expect(formFieldOf('priority')).toBe('priority');
    expect(formFieldOf('')).toBe('');
    expect(formFieldOf('env.HOME')).toBe('');
    expect(formFieldOf('resources.cpu')).toBe('');
  });
});
