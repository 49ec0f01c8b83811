// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * The agents plugin: AI agents (MCP clients) the user connects to their
 * tool terminals. *Connect an Agent…* and *Manage Agents…* (palette,
 * launcher), the approval notifications of `request_control`, the status
 * item while an agent holds control, and *Share with Agent…* / *Stop
 * Sharing with Agent…* on a tool terminal.
 */

import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { ILauncher } from '@jupyterlab/launcher';
import { IStatusBar } from '@jupyterlab/statusbar';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';
import { LabIcon } from '@jupyterlab/ui-components';

import { toolTerminalSettings } from '../settings';
import { CATEGORY_RANK } from '../tiles';
import {
  EXTENSION_ID,
  IToolTerminalTracker,
  TRANSLATION_DOMAIN
} from '../tokens';
import { ApprovalNotifier } from './approval';
import type * as ShareModule from './share';
import { AgentsModel } from './model';
import { ControlStatus } from './statusbar';

/**
 * The command ids of the agents feature.
 */
export namespace AgentCommandIDs {
  /**
   * Create an agent and show how to connect its MCP client.
   */
  export const connect = 'tool-terminal:connect-agent';

  /**
   * List the user's agents, with *Revoke*.
   */
  export const manage = 'tool-terminal:manage-agents';

  /**
   * Let an agent read the current tool terminal's screen.
   */
  export const share = 'tool-terminal:share-with-agent';

  /**
   * Stop letting an agent read the current tool terminal's screen.
   */
  export const unshare = 'tool-terminal:stop-sharing-with-agent';

  /**
   * End the control of the agents holding it (what the status item offers).
   */
  export const revokeControl = 'tool-terminal:revoke-agent-control';
}

/**
 * The icon of *Connect an Agent…*: a terminal with a spark.
 */
export const agentIcon = new LabIcon({
  name: `${EXTENSION_ID}:agent`,
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">' +
    '<rect class="jp-icon3" fill="#616161" x="2" y="4" width="20" height="16" rx="2"/>' +
    '<path fill="#fff" d="M5.5 9l3 3-3 3-1-1 2-2-2-2zM10 15h5v1.5h-5z"/>' +
    '<path fill="#fff" d="M17.5 6.5l.7 1.6 1.6.7-1.6.7-.7 1.6-.7-1.6-1.6-.7 1.6-.7z"/>' +
    '</svg>'
});

/**
 * The description of a command without arguments.
 */
const NO_ARGS = { args: { type: 'object' as const, properties: {} } };

/**
 * The agents plugin.
 */
export const agentsPlugin: JupyterFrontEndPlugin<void> = {
  id: `${EXTENSION_ID}:agents`,
  description:
    'Connect AI agents (MCP clients) to your tool terminals: read-only until you allow them control, in terminals you watch.',
  autoStart: true,
  requires: [IToolTerminalTracker],
  optional: [ICommandPalette, ILauncher, IStatusBar, ITranslator],
  activate: activateAgents
};

/**
 * Activate the agents plugin: its commands, the approval toasts, the status bar countdown and the launcher tile.
 */
function activateAgents(
  app: JupyterFrontEnd,
  tracker: IToolTerminalTracker,
  palette: ICommandPalette | null,
  launcher: ILauncher | null,
  statusBar: IStatusBar | null,
  translator: ITranslator | null
): void {
  const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
  const category = trans.__('Tool Terminals');
  const model = new AgentsModel({
    serverSettings: toolTerminalSettings(app.serviceManager.serverSettings)
  });
  new ApprovalNotifier({ model, trans });
  const status = new ControlStatus({ model, trans });
  statusBar?.registerStatusItem(`${EXTENSION_ID}:agent-control`, {
    item: status,
    align: 'left',
    rank: 1000,
    isActive: () => status.isActive,
    activeStateChanged: status.activeStateChanged
  });

  const available = (): boolean => !model.unavailable;
  const currentSession = (): string | null =>
    tracker.currentWidget?.content.isLive
      ? tracker.currentWidget.content.sessionId
      : null;

  app.commands.addCommand(AgentCommandIDs.connect, {
    label: args =>
      args.launcher === true
        ? trans.__('Connect an Agent')
        : trans.__('Connect an Agent…'),
    caption: trans.__(
      'Create a credential for an AI agent (an MCP client) to use your tool terminals'
    ),
    icon: args => (args.isPalette === true ? undefined : agentIcon),
    describedBy: NO_ARGS,
    isVisible: available,
    execute: async () => {
      const { connectAgent } = await import('./dialog');
      await connectAgent(model, trans);
    }
  });

  app.commands.addCommand(AgentCommandIDs.manage, {
    label: trans.__('Manage Agents…'),
    caption: trans.__('Your AI agents, their state, and Revoke'),
    describedBy: NO_ARGS,
    isVisible: available,
    execute: async () => {
      const { connectAgent, manageAgents } = await import('./dialog');
      if (await manageAgents(model, trans)) {
        await connectAgent(model, trans);
      }
    }
  });

  // Commands on the current tool terminal's session, in module `./share`.
  const onSession = (
    id: string,
    label: string,
    caption: string,
    run: (share: typeof ShareModule, session: string) => Promise<unknown>
  ): void => {
    app.commands.addCommand(id, {
      label,
      caption,
      describedBy: NO_ARGS,
      isVisible: available,
      isEnabled: () => currentSession() !== null,
      execute: async () => {
        const session = currentSession();
        if (session !== null) {
          await run(await import('./share'), session);
        }
      }
    });
  };
  onSession(
    AgentCommandIDs.share,
    trans.__('Share with Agent…'),
    trans.__('Let one of your agents read this terminal (it cannot type)'),
    (share, session) => share.shareSession(session, model, trans)
  );
  onSession(
    AgentCommandIDs.unshare,
    trans.__('Stop Sharing with Agent…'),
    trans.__('Stop letting an agent read this terminal'),
    (share, session) => share.unshareSession(session, model, trans)
  );

  app.commands.addCommand(AgentCommandIDs.revokeControl, {
    label: trans.__('Revoke Agent Control…'),
    caption: trans.__('End the control an agent holds now'),
    describedBy: NO_ARGS,
    isEnabled: () => status.isActive,
    execute: () => status.showRevokeDialog()
  });

  // Its context menu entries (on the panel's body and tab) are in
  // schema/agents.json.
  for (const command of [
    AgentCommandIDs.connect,
    AgentCommandIDs.manage,
    AgentCommandIDs.share,
    AgentCommandIDs.unshare,
    AgentCommandIDs.revokeControl
  ]) {
    palette?.addItem({ command, category, args: { isPalette: true } });
  }
  let tile = launcher?.add({
    command: AgentCommandIDs.connect,
    args: { launcher: true },
    category,
    categoryRank: CATEGORY_RANK,
    // After every instance's tile.
    rank: 10_000
  });
  // Agents turned off on the server (its agent routes answer 404): no
  // tile, and the commands are hidden.
  model.changed.connect(() => {
    if (model.unavailable && tile) {
      tile.dispose();
      tile = undefined;
    }
  });
}
