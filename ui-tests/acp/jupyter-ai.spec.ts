// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Jupyter AI's chat in the real browser: the scripted ACP persona runs its
 * command in a tool terminal of the instance chosen in JupyterLab's setting,
 * once the owner allowed it in JupyterLab's notification
 * (scripts/test-acp-browser.sh starts everything).
 */
import { expect, test } from "@playwright/test";

function env(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run scripts/test-acp-browser.sh`);
  }
  return value;
}

const BASE_URL = env("E2E_BASE_URL");
const TOKEN = env("E2E_TOKEN");
const HOSTNAME = env("E2E_HOSTNAME");
const CHOSEN = env("E2E_CHOSEN");

test("a Jupyter AI persona answers from the tool container once the owner allows it", async ({
  page,
}) => {
  await page.goto(`${BASE_URL}lab?reset&token=${TOKEN}`);
  await page
    .locator('.jp-LauncherCard[title="Create a chat and open it"]')
    .click();
  const chat = page.locator(".jp-chat-widget");
  // The persona the server pre-selects (PersonaManager.default_persona_id).
  await expect(chat.locator(".jp-jai-personaControls-persona")).toContainText(
    "ScriptedAgent",
  );
  const input = chat.getByRole("combobox", { name: /Type a chat message/ });
  await input.fill("run: echo ACP-$((6*7)); hostname");
  await input.press("Enter");

  // The persona is one of the owner's agents: JupyterLab asks the owner.
  const toast = page.locator(".Toastify__toast", { hasText: "ScriptedAgent" });
  await expect(toast).toContainText("hostname", { timeout: 60_000 });
  await toast.getByRole("button", { name: /^Allow for/ }).click();

  // The reply: the command ran in the chosen instance's container.
  const reply = chat.locator(".jp-chat-rendered-message", {
    hasText: "SCRIPTED-REPLY",
  });
  await expect(reply).toContainText(`output: ACP-42 | ${HOSTNAME}`, {
    timeout: 60_000,
  });
  await expect(reply).toContainText("SCRIPTED-REPLY exit=0");
  // The tool call's line says where the command ran.
  await expect(chat).toContainText(`(${CHOSEN})`);
});
