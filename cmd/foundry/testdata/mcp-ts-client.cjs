// A second MCP host for foundry mcp's tests: the TypeScript SDK's client (scripts/mcp-sdk.sh
// installs it; run with NODE_PATH=.test-tools/mcp-sdk/node_modules).
//
//   node mcp-ts-client.cjs STEPS stdio COMMAND ARGS...
//   node mcp-ts-client.cjs STEPS http URL            (bearer token in $MCP_TOKEN, if any)
//
// STEPS is a JSON array of {"list": true}, {"call": NAME, "args": {...}, "timeout": MS} and
// {"sleep": MS}, run in order on one session. It prints one JSON array on stdout: per step,
// {"tools": [...]} (name, description, inputSchema, outputSchema), {"result": ...} or
// {"error": message}; a call's step also has "responses", how many responses to its request
// the transport delivered by the end of the session, and over HTTP "resumptionTokens", the
// event IDs the SDK kept to resume its stream with (Last-Event-ID) when the stream breaks.
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

async function main() {
  const [stepsJSON, mode, target, ...rest] = process.argv.slice(2);
  const steps = JSON.parse(stepsJSON);
  let transport;
  if (mode === "stdio") {
    transport = new StdioClientTransport({ command: target, args: rest, stderr: "inherit" });
  } else {
    const headers = process.env.MCP_TOKEN ? { Authorization: `Bearer ${process.env.MCP_TOKEN}` } : {};
    transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
  }
  const client = new Client({ name: "foundry-test-ts", version: "1" });
  await client.connect(transport);
  // Count the responses to each request as the transport hands them to the client, so that
  // one replayed twice after a reconnect shows.
  const responses = new Map();
  const calls = new Map(); // a call's step -> its request's id
  let calling;
  const send = transport.send.bind(transport);
  transport.send = (msg, opts) => {
    if (msg.method === "tools/call" && calling && !calls.has(calling)) calls.set(calling, msg.id);
    return send(msg, opts);
  };
  const deliver = transport.onmessage;
  transport.onmessage = (msg) => {
    if (msg.id !== undefined && (msg.result !== undefined || msg.error !== undefined)) {
      responses.set(msg.id, (responses.get(msg.id) || 0) + 1);
    }
    deliver(msg);
  };
  const out = [];
  for (const s of steps) {
    const step = {};
    out.push(step);
    try {
      if (s.sleep) {
        await new Promise((r) => setTimeout(r, s.sleep));
        step.slept = s.sleep;
      } else if (s.list) {
        const { tools } = await client.listTools();
        step.tools = tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema, outputSchema: t.outputSchema }));
      } else {
        step.resumptionTokens = [];
        const opts = { onresumptiontoken: (t) => step.resumptionTokens.push(t) };
        if (s.timeout) opts.timeout = s.timeout;
        calling = step;
        step.result = await client.callTool({ name: s.call, arguments: s.args || {} }, undefined, opts);
      }
    } catch (e) {
      step.error = String(e && e.message ? e.message : e);
    }
  }
  for (const [step, id] of calls) step.responses = responses.get(id) || 0;
  process.stdout.write(JSON.stringify(out) + "\n");
  await client.close();
}

main().catch((e) => {
  process.stderr.write(`mcp-ts-client: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
