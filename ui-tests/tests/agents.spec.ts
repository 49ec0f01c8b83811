// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * An AI agent in the owner's tool terminals, end to end: the owner creates
 * the agent in JupyterLab (*Connect an Agent*, token shown once); the agent,
 * an MCP client of the official TypeScript SDK, asks for control; the owner
 * allows it from the notification; the agent opens a terminal and runs a
 * command; the owner opens the agent's terminal from the Running panel and
 * watches its next command live, types in it, and the agent's next command
 * still works; the owner revokes control from the status bar and the agent's
 * next `run_command` is refused; *Manage Agents* revokes the agent itself.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Page } from '@playwright/test';
import { expect, test } from '@playwright/test';

import {
  BASE_URL,
  CONTAINER,
  DISPLAY_NAME,
  openLab,
  screenLines,
  TOKEN,
  typeLine,
  waitForLine
} from './helpers';

/**
 * What a tool call answered: its structured content and whether it was
 * refused.
 */
interface IToolResult {
  structuredContent?: Record<string, unknown>;
  content?: unknown;
  isError?: boolean;
}

/**
 * Call a tool of the endpoint as the agent.
 */
async function call(
  client: Client,
  name: string,
  args: Record<string, unknown> = {}
): Promise<IToolResult> {
  return (await client.callTool({ name, arguments: args })) as IToolResult;
}

/**
 * Run a command of the command palette.
 */
async function palette(page: Page, label: string): Promise<void> {
  await page.keyboard.press('Control+Shift+C');
  const input = page.locator('.jp-ModalCommandPalette input');
  await input.fill(label);
  await page
    .locator('.jp-ModalCommandPalette .lm-CommandPalette-item', {
      hasText: label
    })
    .first()
    .click();
}

/**
 * Delete the test's agents left behind by a failure (through the owner's
 * REST routes: the agent's terminals end with it).
 */
async function deleteAgents(page: Page, name: string): Promise<void> {
  const headers = { Authorization: `token ${TOKEN}` };
  const listed = await page.request.get(`${BASE_URL}tool-terminal/api/agents`, {
    headers
  });
  if (!listed.ok()) {
    return;
  }
  for (const agent of (await listed.json()) as { id: string; name: string }[]) {
    if (agent.name === name) {
      await page.request.delete(
        `${BASE_URL}tool-terminal/api/agents/${encodeURIComponent(agent.id)}`,
        { headers }
      );
    }
  }
}

test('an agent asks, the owner allows, watches its terminal and revokes', async ({
  page
}) => {
  const name = `e2e-agent-${process.pid}`;
  let client: Client | null = null;
  try {
    await openLab(page, 'agents');

    // The owner connects an agent from the launcher: the token, once.
    const card = page.locator('.jp-LauncherCard', {
      hasText: 'Connect an Agent'
    });
    await expect(card).toBeVisible({ timeout: 60_000 });
    await card.click();
    const ask = page.locator('.jp-Dialog');
    await ask.locator('input').fill(name);
    await ask.getByRole('button', { name: 'Create' }).click();
    const info = page.locator('.jp-ToolTerminal-agentConnect');
    await expect(info).toBeVisible();
    const text = async (kind: string) =>
      (await info
        .locator(`.jp-ToolTerminal-copyable[data-kind="${kind}"] pre`)
        .textContent()) ?? '';
    const url = await text('url');
    const token = await text('token');
    expect(url).toBe(`${BASE_URL}tool-terminal/mcp`);
    expect(token.length).toBeGreaterThanOrEqual(16);
    expect(JSON.parse(await text('json'))).toEqual({
      mcpServers: {
        [name]: {
          type: 'http',
          url,
          headers: { Authorization: `Bearer ${token}` }
        }
      }
    });
    expect(await text('claude')).toBe(
      `claude mcp add --transport http ${name} ${url} --header "Authorization: Bearer ${token}"`
    );
    await page
      .locator('.jp-Dialog')
      .getByRole('button', { name: 'Done' })
      .click();
    await expect(info).toHaveCount(0);

    // The agent, with the official SDK's client and the pasted settings.
    client = new Client({ name: 'jtt-e2e-agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(url), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } }
      })
    );
    const listed = await call(client, 'list_instances');
    const instances = listed.structuredContent?.instances as { id: string }[];
    expect(instances.map(i => i.id)).toContain(CONTAINER);
    // Read-only: it may not open a terminal yet.
    const early = await call(client, 'open_terminal', { instance: CONTAINER });
    expect(early.isError).toBe(true);
    const asked = await call(client, 'request_control', {
      reason: 'check the build',
      minutes: 5
    });
    expect(asked.structuredContent?.status).toBe('pending');

    // The owner's notification names the agent and its reason: Allow.
    const toast = page.locator('.Toastify__toast', { hasText: name });
    await expect(toast).toContainText('check the build', { timeout: 15_000 });
    await toast.getByRole('button', { name: 'Allow for 5 minutes' }).click();
    const status = page.locator('.jp-ToolTerminal-agentControl');
    await expect(status).toContainText(name);
    await expect(status).toContainText(/\d:\d\d left/);

    // The agent opens a terminal and runs a command.
    const opened = await call(client, 'open_terminal', { instance: CONTAINER });
    expect(opened.isError ?? false).toBe(false);
    const session = opened.structuredContent?.session as string;
    const first = await call(client, 'run_command', {
      session,
      command: 'echo agent-$((6*7))-first'
    });
    expect(first.structuredContent?.exit_code).toBe(0);
    expect(first.structuredContent?.output).toContain('agent-42-first');

    // The owner opens the agent's terminal from the Running panel.
    await page.locator('.jp-SideBar [data-id="jp-running-sessions"]').click();
    const item = page
      .getByRole('region', { name: 'Tool Terminals Section' })
      .locator('.jp-RunningSessions-item', { hasText: `agent: ${name}` });
    await expect(item).toHaveCount(1, { timeout: 15_000 });
    await expect(item).toContainText(`${DISPLAY_NAME} — agent: ${name}`);
    await item.locator('.jp-RunningSessions-itemLabel').click();
    const tab = page.locator('.lm-DockPanel-tabBar .jp-ToolTerminal-tab', {
      hasText: `agent: ${name}`
    });
    await expect(tab).toHaveCount(1);
    const terminal = page.locator('.jp-ToolTerminal:visible');
    await waitForLine(terminal, /agent-42-first/);

    // The agent's next command shows live in the owner's panel.
    const live = await call(client, 'run_command', {
      session,
      command: 'echo agent-$((7*8))-live'
    });
    expect(live.structuredContent?.output).toContain('agent-56-live');
    await waitForLine(terminal, /^agent-56-live$/);

    // The owner types in it; the agent's next command still works.
    await typeLine(page, terminal, 'echo owner-$((8*9))');
    await waitForLine(terminal, /^owner-72$/);
    const after = await call(client, 'run_command', {
      session,
      command: 'echo agent-after'
    });
    expect(after.structuredContent?.exit_code).toBe(0);
    expect(after.structuredContent?.output).toContain('agent-after');
    expect(after.structuredContent?.output).not.toContain('owner-72');

    // The owner revokes control from the status bar.
    await status.click();
    await page
      .locator('.jp-Dialog')
      .getByRole('button', { name: 'Revoke control' })
      .click();
    await expect(status).toBeHidden();
    const refused = await call(client, 'run_command', {
      session,
      command: 'echo should-not-run'
    });
    expect(refused.isError).toBe(true);
    // Nothing was typed: the screen does not show the command.
    expect((await screenLines(terminal)).join('\n')).not.toContain(
      'should-not-run'
    );

    // Closing the owner's view leaves the agent's terminal running.
    await tab.locator('.lm-TabBar-tabCloseIcon').click();
    await expect(tab).toHaveCount(0);
    await expect(item).toHaveCount(1);
    const still = await call(client, 'read_screen', { session });
    expect(still.isError ?? false).toBe(false);
    expect(still.structuredContent?.text).toContain('agent-after');

    // Manage Agents: Revoke the agent, whose terminal ends with it.
    await palette(page, 'Manage Agents');
    const row = page.locator('.jp-Dialog .jp-ToolTerminal-agentRow', {
      hasText: name
    });
    await row.getByRole('button', { name: 'Revoke' }).click();
    await expect(row).toContainText('revoked');
    await page
      .locator('.jp-Dialog')
      .getByRole('button', { name: 'Close' })
      .click();
    await expect(item).toHaveCount(0, { timeout: 15_000 });
    let gone = false;
    try {
      gone = (await call(client, 'list_terminals')).isError === true;
    } catch {
      // The endpoint refuses the revoked token outright.
      gone = true;
    }
    expect(gone).toBe(true);
  } finally {
    await client?.close().catch(() => undefined);
    await deleteAgents(page, name);
  }
});
