// Drives `computer mcp` with the official MCP TypeScript SDK, the way hosts built on it do.
//
// Usage: node client.mjs SCENARIO COMPUTER_BIN
// Prints JSON lines: events while it runs, then one report ({"report": ...}). Scenarios:
//   tour      initialize, list, call, errors, 20 concurrent calls, then closes N sessions and
//             times each close (stdin closed to relay gone)
//   stripped  the SDK's default environment only (HOME, LOGNAME, PATH, SHELL, TERM, USER), plus
//             COMPUTER_TEST_RUN_USER_BASE when set (it stands in for /run/user in tests)
//   old       the 1.0.x SDK, which knows protocol 2024-11-05 only
//   cancel    starts `shell run sleep 30`, prints {"event":"started"}, aborts it when a line
//             `abort` arrives on stdin, then calls again on the same session
//   hang      starts `shell run sleep 30`, prints {"event":"started"} and waits to be killed

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Client as OldClient } from 'sdk-2024-11-05/client/index.js';
import { StdioClientTransport as OldStdioClientTransport } from 'sdk-2024-11-05/client/stdio.js';
import { createInterface } from 'node:readline';

const [scenario, computerBin] = process.argv.slice(2);

function emit(value) {
  process.stdout.write(JSON.stringify(value) + '\n');
}

// Wraps a transport to keep the server's answer to `initialize` (the negotiated protocol
// version), which neither SDK release exposes the same way.
function sniffing(transport) {
  const seen = { initialize: null };
  const proxy = {
    start: () => transport.start(),
    send: (message, options) => transport.send(message, options),
    close: () => transport.close(),
    get sessionId() { return transport.sessionId; },
    setProtocolVersion: (version) => transport.setProtocolVersion?.(version),
  };
  transport.onmessage = (message, extra) => {
    if (message.id === 0 && message.result?.protocolVersion && !seen.initialize) {
      seen.initialize = message.result;
    }
    proxy.onmessage?.(message, extra);
  };
  transport.onclose = () => proxy.onclose?.();
  transport.onerror = (error) => proxy.onerror?.(error);
  return { proxy, seen };
}

function shellRun(args, complications = {}) {
  return { name: 'COMPUTER', arguments: { surface: 'shell', command: 'run', args, complications } };
}

function parsed(result) {
  const text = result.content?.find((c) => c.type === 'text')?.text;
  return {
    is_error: Boolean(result.isError),
    structured: result.structuredContent ?? null,
    text_json: text ? JSON.parse(text) : null,
  };
}

async function connect(env) {
  const transport = new StdioClientTransport({ command: computerBin, args: ['mcp'], env, stderr: 'inherit' });
  const { proxy, seen } = sniffing(transport);
  const client = new Client({ name: 'ts-sdk-test', version: '0' });
  await client.connect(proxy);
  return { client, transport, seen };
}

function processGone(pid) {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return error.code === 'ESRCH';
  }
}

async function tour() {
  const { client, transport, seen } = await connect(process.env);
  const tools = await client.listTools();
  const echo = await client.callTool(shellRun({ argv: ['echo', 'from typescript'] }));
  const badSurface = await client.callTool({ name: 'COMPUTER', arguments: { surface: 'shelll', command: 'run' } });
  const badField = await client.callTool(shellRun({ argv: ['true'], cwd: '/' }));
  // A wrongly typed argument, a daemon-served command and a multi-step call: the SDK checks
  // each structuredContent against the tool's outputSchema (a mismatch throws).
  const badType = await client.callTool(shellRun({ argv: 'true' }));
  const help = await client.callTool({ name: 'COMPUTER', arguments: { surface: 'shell', command: 'help', args: { command: 'run' } } });
  const steps = await client.callTool({
    name: 'COMPUTER',
    arguments: { steps: [{ surface: 'shell', command: 'run', args: { argv: ['true'] } }, { surface: 'shell', command: 'run', args: { argv: ['echo', 'two'] } }], return: { select: ['$1.exit_code', '$2.stdout'] } },
  });
  let unknownTool;
  try {
    unknownTool = { result: parsed(await client.callTool({ name: 'NOT_A_TOOL', arguments: {} })) };
  } catch (error) {
    unknownTool = { error: String(error.message ?? error) };
  }
  const concurrent = await Promise.all(
    Array.from({ length: 20 }, (_, i) => client.callTool(shellRun({ argv: ['echo', `call ${i}`] }))),
  );
  const relayPid = transport.pid;
  const started = performance.now();
  await client.close();
  const firstCloseMs = performance.now() - started;
  const closes = [firstCloseMs];
  const gone = [processGone(relayPid)];
  for (let i = 0; i < 4; i++) {
    const session = await connect(process.env);
    await session.client.callTool(shellRun({ argv: ['true'] }));
    const pid = session.transport.pid;
    const t0 = performance.now();
    await session.client.close();
    closes.push(performance.now() - t0);
    gone.push(processGone(pid));
  }
  emit({
    report: {
      protocol_version: seen.initialize?.protocolVersion,
      server: seen.initialize?.serverInfo?.name,
      tools: tools.tools.map((t) => t.name),
      output_schema: tools.tools[0].outputSchema ?? null,
      bad_type: parsed(badType),
      help: parsed(help),
      steps: parsed(steps),
      echo: parsed(echo),
      bad_surface: parsed(badSurface),
      bad_field: parsed(badField),
      unknown_tool: unknownTool,
      concurrent: concurrent.map((r) => parsed(r).structured?.stdout ?? null),
      close_ms: closes,
      relay_gone_after_close: gone,
    },
  });
}

async function stripped() {
  const env = getDefaultEnvironment();
  if (process.env.COMPUTER_TEST_RUN_USER_BASE) {
    env.COMPUTER_TEST_RUN_USER_BASE = process.env.COMPUTER_TEST_RUN_USER_BASE;
  }
  const { client, transport, seen } = await connect(env);
  const echo = await client.callTool(shellRun({ argv: ['echo', 'stripped host'] }));
  const relayPid = transport.pid;
  await client.close();
  emit({ report: { env_keys: Object.keys(env).sort(), relay_pid: relayPid, protocol_version: seen.initialize?.protocolVersion, echo: parsed(echo) } });
}

async function old() {
  const transport = new OldStdioClientTransport({ command: computerBin, args: ['mcp'], env: process.env, stderr: 'inherit' });
  const { proxy, seen } = sniffing(transport);
  const client = new OldClient({ name: 'ts-sdk-1.0', version: '0' }, { capabilities: {} });
  await client.connect(proxy);
  const tools = await client.listTools();
  const echo = await client.callTool(shellRun({ argv: ['echo', 'from 2024-11-05'] }));
  await client.close();
  emit({
    report: {
      protocol_version: seen.initialize?.protocolVersion,
      tool_keys: Object.keys(tools.tools[0]).sort(),
      echo: parsed(echo),
    },
  });
}

function nextLine() {
  const lines = createInterface({ input: process.stdin });
  return new Promise((resolve) => lines.once('line', (line) => { lines.close(); resolve(line); }));
}

async function cancel() {
  const { client, transport } = await connect(process.env);
  const controller = new AbortController();
  const running = client
    .callTool(shellRun({ argv: ['sleep', '30'] }), undefined, { signal: controller.signal })
    .then((result) => ({ answered: parsed(result) }), (error) => ({ rejected: String(error.message ?? error) }));
  emit({ event: 'started', relay_pid: transport.pid });
  await nextLine();
  controller.abort('the person changed their mind');
  const outcome = await running;
  const after = await client.callTool(shellRun({ argv: ['echo', 'still here'] }));
  await client.close();
  emit({ report: { outcome, after: parsed(after) } });
}

async function hang() {
  const { client, transport } = await connect(process.env);
  client.callTool(shellRun({ argv: ['sleep', '30'] })).catch(() => {});
  emit({ event: 'started', relay_pid: transport.pid });
  await new Promise(() => {});
}

const scenarios = { tour, stripped, old, cancel, hang };
if (!scenarios[scenario]) {
  console.error(`unknown scenario ${scenario}; expected one of ${Object.keys(scenarios).join(', ')}`);
  process.exit(2);
}
await scenarios[scenario]();
