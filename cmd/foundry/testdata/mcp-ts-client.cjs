// A second MCP host for foundry mcp's tests: the TypeScript SDK's client (scripts/mcp-sdk.sh
// installs it; run with NODE_PATH=.test-tools/mcp-sdk/node_modules).
//
//   node mcp-ts-client.cjs STEPS stdio COMMAND ARGS...
//   node mcp-ts-client.cjs STEPS http URL            (bearer token in $MCP_TOKEN, if any)
//
// STEPS is a JSON array of {"list": true}, {"call": NAME, "args": {...}} and {"sleep": MS},
// run in order on one session. It prints one JSON array on stdout: per step, {"tools": [...]}
// (name, description, inputSchema, outputSchema), {"result": ...} or {"error": message}.
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
  const out = [];
  for (const s of steps) {
    try {
      if (s.sleep) {
        await new Promise((r) => setTimeout(r, s.sleep));
        out.push({ slept: s.sleep });
      } else if (s.list) {
        const { tools } = await client.listTools();
        out.push({ tools: tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema, outputSchema: t.outputSchema })) });
      } else {
        out.push({ result: await client.callTool({ name: s.call, arguments: s.args || {} }) });
      }
    } catch (e) {
      out.push({ error: String(e && e.message ? e.message : e) });
    }
  }
  process.stdout.write(JSON.stringify(out) + "\n");
  await client.close();
}

main().catch((e) => {
  process.stderr.write(`mcp-ts-client: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
