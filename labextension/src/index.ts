// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import type {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ILayoutRestorer } from '@jupyterlab/application';
import type { MainAreaWidget } from '@jupyterlab/apputils';
import {
  ICommandPalette,
  IThemeManager,
  WidgetTracker
} from '@jupyterlab/apputils';
import { ISearchProviderRegistry } from '@jupyterlab/documentsearch';
import { ILauncher } from '@jupyterlab/launcher';
import { IRunningSessionManagers } from '@jupyterlab/running';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import type { ITerminal } from '@jupyterlab/terminal';
import { ITranslator, nullTranslator } from '@jupyterlab/translation';

import { agentsPlugin } from './agents/plugin';
import { jupyterAiPlugin } from './agents/jupyterai';
import { filesPlugin } from './files';
import { recordingsPlugin } from './recordings';
import { observePlugin } from './observe';
/* eslint-disable jupyter/prefer-lazy-imports -- the plugin's activate()
   registers its commands, tiles, Running section and settings at once. */
import { addCommands } from './commands';
import { ToolInstances } from './instances';
import { restorePanels } from './restorer';
import { RunningToolTerminals } from './running';
import { ToolTerminalSearchProvider } from './search';
import { addWhereItem } from './statusbar';
import { ToolTerminalSessions } from './sessions';
import { addSectionIcon, LauncherTiles } from './tiles';
import {
  DEFAULT_PREFERENCES,
  followTerminalSettings,
  toolTerminalSettings
} from './settings';
/* eslint-enable jupyter/prefer-lazy-imports */
import type { IToolTerminal } from './tokens';
import {
  CommandIDs,
  EXTENSION_ID,
  IToolTerminalTracker,
  TRANSLATION_DOMAIN
} from './tokens';

// What other extensions use: the tracker's token, the panel's interface and
// the session model it names, and the command ids (the README documents
// them).
export { CommandIDs, IToolTerminalTracker } from './tokens';
export type { ISessionAgent, ISessionModel, IToolTerminal } from './tokens';

/**
 * The tool terminal plugin: launcher tiles, terminal panels, commands, the
 * layout restorer and the Running panel section; it provides the tracker of
 * tool terminal panels.
 */
const plugin: JupyterFrontEndPlugin<IToolTerminalTracker> = {
  id: `${EXTENSION_ID}:plugin`,
  description:
    "Terminals inside the user's own tool instances, from the launcher.",
  autoStart: true,
  provides: IToolTerminalTracker,
  optional: [
    ICommandPalette,
    ILauncher,
    ILayoutRestorer,
    ISettingRegistry,
    ITranslator,
    IRunningSessionManagers,
    IThemeManager,
    ISearchProviderRegistry,
    IStatusBar
  ],
  activate
};

/**
 * The plugins of the extension. Each feature that stands on its own (the
 * read-only observer view of issue 15, for one) is a plugin of its own
 * module that requires {@link IToolTerminalTracker}, added to this list.
 */
const plugins: JupyterFrontEndPlugin<unknown>[] = [
  plugin,
  observePlugin,
  agentsPlugin,
  jupyterAiPlugin,
  filesPlugin,
  recordingsPlugin
];

export default plugins;

/**
 * Activate the tool terminal plugin.
 */
function activate(
  app: JupyterFrontEnd,
  palette: ICommandPalette | null,
  launcher: ILauncher | null,
  restorer: ILayoutRestorer | null,
  settingRegistry: ISettingRegistry | null,
  translator: ITranslator | null,
  runningSessionManagers: IRunningSessionManagers | null,
  themeManager: IThemeManager | null,
  searchRegistry: ISearchProviderRegistry | null,
  statusBar: IStatusBar | null
): IToolTerminalTracker {
  const trans = (translator ?? nullTranslator).load(TRANSLATION_DOMAIN);
  const serverSettings = toolTerminalSettings(
    app.serviceManager.serverSettings
  );
  const category = trans.__('Tool Terminals');
  const tracker = new WidgetTracker<MainAreaWidget<IToolTerminal>>({
    namespace: 'tool-terminal'
  });
  const instances = new ToolInstances({ serverSettings });
  // The Running panel is the one reader of the sessions list: it is polled
  // only for it.
  const sessions = new ToolTerminalSessions({
    serverSettings,
    auto: runningSessionManagers !== null
  });
  const terminalOptions: Partial<ITerminal.IOptions> = {};
  const preferences = { ...DEFAULT_PREFERENCES };

  addCommands(app, tracker, instances, {
    sessions,
    translator,
    terminalOptions,
    preferences
  });

  if (launcher !== null) {
    addSectionIcon(app.commands, launcher, category);
    new LauncherTiles({ launcher, instances, category });
    // Refresh as soon as a launcher is opened or shown.
    app.shell.currentChanged?.connect((_, change) => {
      const widget = change.newValue;
      if (
        widget !== null &&
        (widget.hasClass('jp-Launcher') ||
          widget.node.querySelector('.jp-Launcher') !== null)
      ) {
        void instances.refresh();
      }
    });
  }

  // The context menus, the File > New entry and the shortcuts are declared
  // in schema/plugin.json (users rebind or hide them in the settings).
  if (palette !== null) {
    Private.addToPalette(palette, category);
  }

  if (restorer !== null) {
    void restorePanels(restorer, tracker);
  }

  if (runningSessionManagers !== null) {
    // Added once the list is known: the section's first view shows what it
    // gives then, and a change signalled while the Running panel is hidden
    // (during a reload, until the layout is restored) would be dropped.
    void sessions.ready.then(() => {
      runningSessionManagers.add(
        new RunningToolTerminals({
          sessions,
          tracker,
          instances,
          commands: app.commands,
          trans
        })
      );
    });
  }

  const setOption: Parameters<typeof followTerminalSettings>[4] = (
    key,
    value
  ) => {
    tracker.forEach(widget => {
      widget.content.setTerminalOption(key, value);
    });
  };
  if (settingRegistry !== null) {
    followTerminalSettings(
      settingRegistry,
      plugin.id,
      terminalOptions,
      preferences,
      setOption
    );
  }
  // A terminal that inherits JupyterLab's theme reads its colours again when
  // the theme changes (setting the theme option re-reads them, as
  // JupyterLab's terminal extension does for its own terminals).
  themeManager?.themeChanged.connect(() => {
    setOption('theme', terminalOptions.theme ?? 'inherit');
  });
  if (statusBar !== null) {
    addWhereItem(app, statusBar, tracker, instances, trans);
  }
  // Ctrl+F and Edit > Find… in a tool terminal.
  searchRegistry?.add('jupyter-tool-terminal', ToolTerminalSearchProvider);
  return tracker;
}

/**
 * Module internals.
 */
namespace Private {
  /**
   * Put the commands in the command palette (menus and shortcuts are in the
   * plugin's settings schema).
   */
  export function addToPalette(
    palette: ICommandPalette,
    category: string
  ): void {
    for (const command of [
      CommandIDs.open,
      CommandIDs.reset,
      CommandIDs.restart,
      CommandIDs.close,
      CommandIDs.refresh
    ]) {
      palette.addItem({ command, category, args: { isPalette: true } });
    }
  }
}
