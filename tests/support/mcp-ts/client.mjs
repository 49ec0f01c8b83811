// The official TypeScript MCP SDK client as an agent: list the tools, then list_instances,
// open_terminal in the instance given, run_command, and print what it got as one JSON line.
// Usage: node client.mjs URL TOKEN INSTANCE COMMAND
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, instance, command] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "tool-terminal-test", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const instances = await client.callTool({ name: "list_instances", arguments: {} });
const opened = await client.callTool({ name: "open_terminal", arguments: { instance } });
const session = opened.structuredContent?.session;
const ran = await client.callTool({ name: "run_command", arguments: { session, command } });
const unknown = await client.callTool({ name: "no_such_tool", arguments: {} });
console.log(
  JSON.stringify({
    protocolVersion: transport.protocolVersion ?? null,
    server: client.getServerVersion(),
    tools: tools.tools.map((tool) => tool.name),
    instances: instances.structuredContent,
    opened: opened.structuredContent,
    ran: ran.structuredContent,
    ranText: ran.content.map((part) => part.text).join("\n"),
    unknown: { isError: unknown.isError, text: unknown.content.map((part) => part.text).join("\n") },
  }),
);
await client.close();
